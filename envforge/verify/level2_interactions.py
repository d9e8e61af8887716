"""Level 2 — interactions: do event orders and episode boundaries agree over whole programs?

A hypothesis state machine drives both drivers with the same rules: resets with drawn seeds,
single steps, long runs of one action, and short action sequences. After every rule the
invariant compares canonical state, reward and flags. Stepping a finished episode is not a
rule (episode boundaries are the verifier's): after ``terminated``/``truncated`` only a reset
may follow. In exact mode both sides run free; in tolerance mode the port is re-synced to the
reference after each compared step so float drift does not accumulate. A failure shrinks to a
minimal program, which goes into the Finding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
from hypothesis import Phase
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from envforge.backends.base import State, Transition, concat_states
from envforge.errors import DriverFailure, DriverRaised
from envforge.verify.compare import compare_states, compare_transitions
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.reachable import start_states
from envforge.verify.search import run_search, search_settings
from envforge.verify.strategies import action_strategy, stack_actions
from envforge.verify.tape import PairStep, pair_finding, step_pair
from envforge.verify.verdict import LevelResult

SEEDS = st.integers(0, 2**32 - 1)
SHRINK_BUDGET_CALLS = 20_000
"""Shrinking a long program replays it hundreds of times: after this many more resets and steps
the smallest failing program so far is kept (a count, not a time, so findings reproduce)."""


class _Divergence(AssertionError):
    pass


@dataclass
class _Record:
    """What the last failing program did; the final (shrunk) replay overwrites earlier ones."""

    finding: Finding | None = None
    driver_error: DriverFailure | None = None
    steps: int = 0
    draws: int = 0
    seconds: float = 0.0
    programs: int = 0
    events: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    first_failure: int | None = None

    def shrink_stopped(self) -> bool:
        """After the budget every program passes untried, so hypothesis stops shrinking."""
        return (
            self.first_failure is not None and self.calls - self.first_failure > SHRINK_BUDGET_CALLS
        )


def make_machine(ctx: VerifyContext, record: _Record) -> type[RuleBasedStateMachine]:
    spec = ctx.spec
    actions = action_strategy(spec)
    exact = spec.compare.mode == "exact"

    class Interactions(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.program: list[str] = []
            self.seed = 0
            self.history: list[Any] = []
            self.ref_state: State = {}
            self.port_state: State = {}
            self.done = True
            record.programs += 1

        # ---- helpers ----------------------------------------------------------------------
        def _guard(self, fn: Any, *args: Any) -> Any:
            if record.driver_error is not None:
                raise _Divergence("driver already failed")
            try:
                return fn(*args)
            except DriverFailure as e:
                self._driver_failed(e)

        def _driver_failed(self, e: DriverFailure) -> NoReturn:
            """Keep the failure for the level's error finding; this program stops here."""
            e.actions = list(self.history)
            e.state_before = (
                to_jsonable({k: v[0] for k, v in self.ref_state.items()})
                if self.ref_state
                else None
            )
            record.driver_error = e
            raise _Divergence(str(e)) from None

        def _fail(self, check: str, message: str, pair: PairStep, before: State | None) -> None:
            finding = pair_finding(
                ctx,
                2,
                check,
                message,
                pair,
                0,
                before,
                seed=self.seed,
                step=len(self.history),
                actions=list(self.history),
            )
            finding.detail = "shrunk program:\n" + "\n".join(self.program)
            record.finding = finding
            if record.first_failure is None:
                record.first_failure = record.calls
            raise _Divergence(finding.message)

        def _reset(self, seed: int) -> None:
            if record.shrink_stopped():
                return
            record.calls += 1
            self.program.append(f"reset(seed={seed})")
            self.seed, self.history, self.done = seed, [], False
            seeds = np.array([seed], dtype=np.uint32)
            ref = self._guard(ctx.ref.reset, seeds)
            if spec.rng.mode == "sync":
                self.ref_state, self.port_state = ref, ref  # inject the reference's reset state
                return
            port = self._guard(ctx.port.reset, seeds)
            diff = compare_states(spec, ref, port)
            if diff.mismatch.any():
                empty = np.zeros(1)
                tr_ref = Transition(
                    ref,
                    np.zeros((1, *spec.observation.shape)),
                    empty,
                    empty.astype(bool),
                    empty.astype(bool),
                )
                tr_port = Transition(port, tr_ref.obs, empty, tr_ref.terminated, tr_ref.truncated)
                pair = PairStep(tr_ref, tr_port, diff)
                self._fail("reset.mismatch", "reset(seed) differs in {fields}", pair, None)
            self.ref_state, self.port_state = ref, port

        def _step(self, action: Any) -> None:
            if record.shrink_stopped():
                return
            record.calls += 1
            act = stack_actions(spec, [action])
            self.history.append(to_jsonable(act[0]))
            start = time.perf_counter()
            # the salt makes a repeated state draw afresh; a replayed program draws the same
            salt = (self.seed << 20) + len(self.history)
            pair = self._guard(step_pair, ctx, self.ref_state, self.port_state, act, salt)
            record.seconds += time.perf_counter() - start
            record.steps += 1
            if pair.ref_draws is not None:
                record.draws += int(min(pair.ref_draws.count[0], pair.ref_draws.size))
            self._compared(pair, self.ref_state)

        def _steps(self, actions: list[Any]) -> None:
            """Step through ``actions`` until the episode ends, compared after every step.

            Without an RNG tape each side takes the whole run in one driver call
            (``Driver.step_sequence``) and the steps are then compared one by one exactly as
            :meth:`_step` would: same history, counts, shrink budget and finding. A side that
            raises partway is stepped again one call per step, so a divergence before the
            raise is still what gets reported."""
            if spec.rng.step == "tape" or len(actions) < 2:
                for action in actions:
                    if self.done or record.shrink_stopped():
                        break
                    self._step(action)
                return
            if self.done or record.shrink_stopped():
                return
            if record.driver_error is not None:
                raise _Divergence("driver already failed")
            acts = stack_actions(spec, actions)
            start = time.perf_counter()
            try:
                ref_trs = ctx.ref.step_sequence(self.ref_state, acts[:, None], True)
                k = len(ref_trs)
                if exact:  # the port runs free from its own state
                    port_trs = ctx.port.step_sequence(self.port_state, acts[:k, None])
                else:  # re-synced: each step from the reference's state before it, in one batch
                    befores = [self.port_state] + [tr.state for tr in ref_trs[:-1]]
                    batch = ctx.port.step(concat_states(befores), acts[:k])
                    port_trs = [batch.take(slice(t, t + 1)) for t in range(k)]
            except DriverRaised:
                record.seconds += time.perf_counter() - start
                for action in actions:
                    if self.done or record.shrink_stopped():
                        break
                    self._step(action)
                return
            except DriverFailure as e:
                self._driver_failed(e)
            record.seconds += time.perf_counter() - start
            # compared as one batch of k rows (the comparison is row by row), then walked
            befores = [self.ref_state] + [tr.state for tr in ref_trs[:-1]]
            bad = compare_transitions(
                spec, _stack(ref_trs), _stack(port_trs), concat_states(befores), acts[:k]
            ).mismatch
            for t in range(k):
                if record.shrink_stopped():
                    return
                record.calls += 1
                self.history.append(to_jsonable(acts[t]))
                record.steps += 1
                ref, port = ref_trs[t], port_trs[t]
                if bad[t]:  # the single step's own comparison makes the finding
                    diff = compare_transitions(spec, ref, port, befores[t], acts[t : t + 1])
                    self._compared(PairStep(ref, port, diff), befores[t])
                self.ref_state = ref.state
                self.port_state = port.state if exact else ref.state
                self.done = bool(ref.terminated[0] or ref.truncated[0])

        def _compared(self, pair: PairStep, before: State) -> None:
            """After one compared step: a finding, or both sides move on."""
            if pair.mismatch.any():
                self._fail(
                    "sequence.mismatch",
                    "after this program the sides differ in {fields}",
                    pair,
                    before,
                )
            self.ref_state = pair.ref.state
            self.port_state = pair.port.state if exact else pair.ref.state  # re-sync (tolerance)
            self.done = bool(pair.ref.terminated[0] or pair.ref.truncated[0])

        # ---- rules --------------------------------------------------------------------------
        @initialize(seed=SEEDS)
        def start(self, seed: int) -> None:
            self._reset(seed)

        @rule(seed=SEEDS)
        def reset(self, seed: int) -> None:
            self._reset(seed)

        @precondition(lambda self: not self.done)
        @rule(action=actions)
        def step(self, action: Any) -> None:
            self.program.append(f"step({to_jsonable(action)})")
            self._step(action)

        @precondition(lambda self: not self.done)
        @rule(action=actions, n=st.integers(2, 200))
        def run(self, action: Any, n: int) -> None:
            self.program.append(f"run({to_jsonable(action)}, n={n})")
            self._steps([action] * n)

        @precondition(lambda self: not self.done)
        @rule(sequence=st.lists(actions, min_size=2, max_size=40))
        def sequence(self, sequence: list[Any]) -> None:
            self.program.append(f"sequence({[to_jsonable(a) for a in sequence]})")
            self._steps(sequence)

    return Interactions


def _stack(transitions: list[Transition]) -> Transition:
    """Transitions of one env each, as one batch."""
    return Transition(
        state=concat_states([tr.state for tr in transitions]),
        obs=np.concatenate([tr.obs for tr in transitions]),
        reward=np.concatenate([tr.reward for tr in transitions]),
        terminated=np.concatenate([tr.terminated for tr in transitions]),
        truncated=np.concatenate([tr.truncated for tr in transitions]),
    )


SEQUENCE_LENGTH = 10
"""Distribution mode: actions per tested sequence."""


def _run_distributions(ctx: VerifyContext) -> LevelResult:
    """``[rng] step = "distribution"``: states reached after short action sequences, each side
    drawing afresh, compared as distributions (programs cannot be compared step by step)."""
    from envforge.verify.distribution import check_sequence_distributions

    states = start_states(ctx, 21, max(1, ctx.spec.rng.states // 2))
    length = min(SEQUENCE_LENGTH, ctx.spec.verify.l2_steps)
    result = check_sequence_distributions(ctx, states, length)
    if result.finding is not None:
        return LevelResult(2, "fail", result.finding.message, [result.finding], result.stats)
    summary = (
        f"{result.stats['distribution_tests']} two-sample tests of {length}-step sequences "
        f"({result.stats['samples_per_side']} samples a side) agree"
    )
    return LevelResult(2, "pass", summary, stats=result.stats)


def run(ctx: VerifyContext) -> LevelResult:
    if ctx.spec.rng.step == "distribution":
        return _run_distributions(ctx)
    record = _Record()
    machine = make_machine(ctx, record)
    config = search_settings(
        ctx.count(ctx.spec.verify.l2_examples, 5),
        [Phase.generate, Phase.shrink],
        stateful_step_count=ctx.spec.verify.l2_steps,
        derandomize=True,
    )
    run_search(
        lambda: run_state_machine_as_test(machine, settings=config),
        _Divergence,
        lambda: record.driver_error is not None or record.shrink_stopped(),
    )
    if record.finding is not None and record.shrink_stopped():
        record.finding.detail = record.finding.detail.replace(
            "shrunk program:", f"program (shrinking stopped after {SHRINK_BUDGET_CALLS} calls):", 1
        )
    if record.driver_error is not None:
        raise record.driver_error
    stats = {
        "programs": record.programs,
        "steps": record.steps,
        "steps_per_second": round(2 * record.steps / record.seconds) if record.seconds else None,
        "mode": "free-running" if ctx.spec.compare.mode == "exact" else "re-synced each step",
    }
    if ctx.spec.rng.step == "tape":
        stats["draws_accounted"] = record.draws
    if record.finding is not None:
        return LevelResult(2, "fail", record.finding.message, [record.finding], stats)
    return LevelResult(
        2, "pass", f"{record.programs} programs, {record.steps} steps agree", stats=stats
    )
