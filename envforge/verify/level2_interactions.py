"""Level 2 — interactions: do event orders and episode boundaries agree over whole programs?

A hypothesis state machine (:class:`Interactions`) drives both drivers with the same rules:
resets with drawn seeds, single steps, long runs of one action, and short action sequences.
There is no separate invariant: every reset and every step inside a rule is compared as it
happens (canonical state, observation, reward and flags, through ``tape.step_pair`` or one
batched comparison of a whole run), and the first difference ends the program. Stepping a
finished episode is not a rule (episode boundaries are the verifier's): after
``terminated``/``truncated`` only a reset may follow. In exact mode both sides run free; in
tolerance mode the port is re-synced to the reference after each compared step so float drift
does not accumulate. A failure shrinks to a minimal program, which goes into the Finding (a
shrink that would replay over ``SHRINK_BUDGET_CALLS`` more calls keeps the smallest so far).
In distribution mode (``[rng] step = "distribution"``) programs cannot be compared step by
step: states after short sequences are compared as distributions instead.
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
from envforge.spec import EnvSpec
from envforge.verify.compare import Diff, compare_states, compare_transitions
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


ACTION = st.runner().flatmap(lambda machine: machine.actions)
"""One action, drawn from the spec's action space of the machine that runs the program."""
ACTIONS = st.runner().flatmap(lambda machine: st.lists(machine.actions, min_size=2, max_size=40))


class Interactions(RuleBasedStateMachine):
    """Both drivers under one program of rules: ``start``/``reset`` (a drawn seed), ``step``
    (one action), ``run`` (one action n times), ``sequence`` (2 to 40 actions). Every step is
    compared as it happens; the first difference is the level's finding (the program so far,
    shrunk by hypothesis). After ``terminated``/``truncated`` only a reset may follow.

    State kept between rules: both sides' current states (the port's is the reference's again
    after every compared step in tolerance mode), the seed of the last reset, the actions
    since it (the finding's history), and the program text.
    """

    def __init__(self, ctx: VerifyContext, record: _Record, actions: st.SearchStrategy) -> None:
        super().__init__()
        self.ctx, self.spec, self.record = ctx, ctx.spec, record
        self.actions = actions
        self.exact = ctx.spec.compare.mode == "exact"
        self.program: list[str] = []
        self.seed = 0
        self.history: list[Any] = []
        self.ref_state: State = {}
        self.port_state: State = {}
        self.done = True
        record.programs += 1

    # ---- the rules --------------------------------------------------------------------------
    @initialize(seed=SEEDS)
    def start(self, seed: int) -> None:
        self.reset_both(seed)

    @rule(seed=SEEDS)
    def reset(self, seed: int) -> None:
        self.reset_both(seed)

    @precondition(lambda self: not self.done)
    @rule(action=ACTION)
    def step(self, action: Any) -> None:
        self.program.append(f"step({to_jsonable(action)})")
        self.step_both(action)

    @precondition(lambda self: not self.done)
    @rule(action=ACTION, n=st.integers(2, 200))
    def run(self, action: Any, n: int) -> None:
        self.program.append(f"run({to_jsonable(action)}, n={n})")
        self.step_through([action] * n)

    @precondition(lambda self: not self.done)
    @rule(sequence=ACTIONS)
    def sequence(self, sequence: list[Any]) -> None:
        self.program.append(f"sequence({[to_jsonable(a) for a in sequence]})")
        self.step_through(sequence)

    # ---- how a rule drives both sides -------------------------------------------------------
    def reset_both(self, seed: int) -> None:
        """Reset both sides with ``seed``; their states must agree (sync mode: the port gets
        the reference's)."""
        if self.record.shrink_stopped():
            return
        self.record.calls += 1
        self.program.append(f"reset(seed={seed})")
        self.seed, self.history, self.done = seed, [], False
        seeds = np.array([seed], dtype=np.uint32)
        ref = self.guard(self.ctx.ref.reset, seeds)
        if self.spec.rng.mode == "sync":
            self.ref_state, self.port_state = ref, ref  # inject the reference's reset state
            return
        port = self.guard(self.ctx.port.reset, seeds)
        diff = compare_states(self.spec, ref, port)
        if diff.mismatch.any():
            pair = _reset_pair(self.spec, ref, port, diff)
            self.fail("reset.mismatch", "reset(seed) differs in {fields}", pair, None)
        self.ref_state, self.port_state = ref, port

    def step_both(self, action: Any) -> None:
        """One step on both sides (under a tape with the same draws), compared."""
        if self.record.shrink_stopped():
            return
        self.record.calls += 1
        act = stack_actions(self.spec, [action])
        self.history.append(to_jsonable(act[0]))
        start = time.perf_counter()
        # the salt makes a repeated state draw afresh; a replayed program draws the same
        salt = (self.seed << 20) + len(self.history)
        pair = self.guard(step_pair, self.ctx, self.ref_state, self.port_state, act, salt)
        self.record.seconds += time.perf_counter() - start
        self.record.steps += 1
        if pair.ref_draws is not None:
            self.record.draws += int(min(pair.ref_draws.count[0], pair.ref_draws.size))
        self.compared(pair, self.ref_state)

    def step_through(self, actions: list[Any]) -> None:
        """Step through ``actions`` until the episode ends, compared after every step.

        Without an RNG tape each side takes the whole run in one driver call
        (:meth:`run_whole`); the steps are then compared one by one exactly as
        :meth:`step_both` would. A side that raises partway is stepped again one call per
        step, so a divergence before the raise is still what gets reported."""
        if self.done or self.record.shrink_stopped():
            return
        if self.spec.rng.step == "tape" or len(actions) < 2 or not self.run_whole(actions):
            for action in actions:
                if self.done or self.record.shrink_stopped():
                    break
                self.step_both(action)

    def run_whole(self, actions: list[Any]) -> bool:
        """Both sides step ``actions`` in one call each (the port from the reference's states
        in tolerance mode), then the steps are walked; False when a side raised."""
        if self.record.driver_error is not None:
            raise _Divergence("driver already failed")
        acts = stack_actions(self.spec, actions)
        start = time.perf_counter()
        try:
            ref_trs = self.ctx.ref.step_sequence(self.ref_state, acts[:, None], True)
            k = len(ref_trs)
            befores = [self.ref_state] + [tr.state for tr in ref_trs[:-1]]
            if self.exact:  # the port runs free from its own state
                port_trs = self.ctx.port.step_sequence(self.port_state, acts[:k, None])
            else:  # re-synced: each step from the reference's state before it, in one batch
                starts = [self.port_state, *befores[1:]]
                batch = self.ctx.port.step(concat_states(starts), acts[:k])
                port_trs = [batch.take(slice(t, t + 1)) for t in range(k)]
        except DriverRaised:
            self.record.seconds += time.perf_counter() - start
            return False
        except DriverFailure as e:
            self.driver_failed(e)
        self.record.seconds += time.perf_counter() - start
        self.walk(acts[:k], ref_trs, port_trs, befores)
        return True

    def walk(
        self,
        acts: np.ndarray,
        ref_trs: list[Transition],
        port_trs: list[Transition],
        befores: list[State],
    ) -> None:
        """The steps of a whole run, compared as one batch (row by row), then walked in order
        so the history, counts, shrink budget and finding are those of single steps."""
        bad = compare_transitions(
            self.spec, _stack(ref_trs), _stack(port_trs), concat_states(befores), acts
        ).mismatch
        for t, (ref, port) in enumerate(zip(ref_trs, port_trs, strict=True)):
            if self.record.shrink_stopped():
                return
            self.record.calls += 1
            self.record.steps += 1
            self.history.append(to_jsonable(acts[t]))
            if bad[t]:  # the single step's own comparison makes the finding
                diff = compare_transitions(self.spec, ref, port, befores[t], acts[t : t + 1])
                self.compared(PairStep(ref, port, diff), befores[t])
            self.moved_on(ref, port)

    def compared(self, pair: PairStep, before: State) -> None:
        """After one compared step: a finding, or both sides move on."""
        if pair.mismatch.any():
            message = "after this program the sides differ in {fields}"
            self.fail("sequence.mismatch", message, pair, before)
        self.moved_on(pair.ref, pair.port)

    def moved_on(self, ref: Transition, port: Transition) -> None:
        self.ref_state = ref.state
        self.port_state = port.state if self.exact else ref.state  # re-sync (tolerance)
        self.done = bool(ref.terminated[0] or ref.truncated[0])

    # ---- how a program ends -----------------------------------------------------------------
    def guard(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, a driver call; a driver failure ends the program."""
        if self.record.driver_error is not None:
            raise _Divergence("driver already failed")
        try:
            return fn(*args)
        except DriverFailure as e:
            self.driver_failed(e)

    def driver_failed(self, e: DriverFailure) -> NoReturn:
        """Keep the failure for the level's error finding; this program stops here."""
        e.actions = list(self.history)
        e.state_before = (
            to_jsonable({k: v[0] for k, v in self.ref_state.items()}) if self.ref_state else None
        )
        self.record.driver_error = e
        raise _Divergence(str(e)) from None

    def fail(self, check: str, message: str, pair: PairStep, before: State | None) -> NoReturn:
        """The sides differ: the finding (with the program so far); this program stops here."""
        finding = pair_finding(
            self.ctx,
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
        self.record.finding = finding
        if self.record.first_failure is None:
            self.record.first_failure = self.record.calls
        raise _Divergence(finding.message)


def _reset_pair(spec: EnvSpec, ref: State, port: State, diff: Diff) -> PairStep:
    """Two reset states as a compared pair (no observation, reward or flags to compare)."""
    empty = np.zeros(1)
    flags = empty.astype(bool)
    obs = np.zeros((1, *spec.observation.shape))
    tr_ref = Transition(ref, obs, empty, flags, flags)
    return PairStep(tr_ref, Transition(port, obs, empty, flags, flags), diff)


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
    actions = action_strategy(ctx.spec)

    def machine() -> Interactions:  # hypothesis takes a factory of machines, typed as a class
        return Interactions(ctx, record, actions)

    config = search_settings(
        ctx.count(ctx.spec.verify.l2_examples, 5),
        [Phase.generate, Phase.shrink],
        stateful_step_count=ctx.spec.verify.l2_steps,
        derandomize=True,
    )
    run_search(
        lambda: run_state_machine_as_test(machine, settings=config),  # type: ignore[arg-type]
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
