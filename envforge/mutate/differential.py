"""Differential testing of a mutant against the unmutated implementation (same language).

Both are driven in this process on the same inputs: resets over many seeds (compared as
distributions in ``sync`` mode, where only the distribution is specified), one step from
states sampled over the spec's ranges (boundaries over-weighted) under every discrete action
(in batches, and some one state per call), and one step from each state along random
rollouts of the original (re-synced each step, so only the mutation's one-step effect is
seen). Comparison uses the spec's own notion of equality (exact, or its tolerances), since
that is what the verifier is asked to decide.

Survivors also get states on the original's branch thresholds (found by bisection, as L1
does in exact mode) and, when the mutation can reach ``reset`` in replicate mode, a
comparison of resets over all 2^32 seeds (``mutate/seeds.py``).

The result serves two purposes: which keys a mutant changes in one step (to judge whether a
finding was localized to the right field), and, for survivors, whether the mutant differs at
all (a witness makes it a verifier weakness; none after the full effort is the evidence for
an equivalence verdict).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from envforge.backends.base import Driver, State, Transition, take_state
from envforge.mutate.differential_dist import (
    StepSuspects,
    count_alone,
    paired_shift_pvalue,
    reset_done,
    value_at,
)
from envforge.mutate.differential_training import MutantStepFailed, run_phase
from envforge.rng.draws import row_seeds
from envforge.verify.boundaries import boundary_states
from envforge.verify.compare import compare_states, compare_transitions, follows_termination
from envforge.verify.findings import to_jsonable
from envforge.verify.policies import random_actions
from envforge.verify.reset_valid import invalid_first
from envforge.verify.stats import support_pvalue
from envforge.verify.strategies import sample_states
from envforge.verify.tape import account


@dataclass(frozen=True)
class Effort:
    reset_seeds: int
    sampled_states: int
    rollout_envs: int
    rollout_steps: int
    boundary_lines: int = 0
    """Bisection lines to the original's branch thresholds (see verify/boundaries.py)."""
    all_seeds: bool = False
    """Compare resets over every uint32 seed (replicate mode only)."""
    single_states: int = 0
    """Sampled states also stepped one per call: a port may step a short batch by another
    path (pong's Rust port steps blocks of four in SIMD lanes, the rest one by one)."""


LIGHT = Effort(
    reset_seeds=2048,
    sampled_states=2048,
    rollout_envs=64,
    rollout_steps=64,
    boundary_lines=2048,
    single_states=512,
)
FULL = Effort(
    reset_seeds=8192,
    sampled_states=65536,
    rollout_envs=256,
    rollout_steps=2000,
    boundary_lines=16384,
    single_states=4096,
)
BATCH = 4096
ACTIONS_PER_STATE = 8
"""Sampled states are stepped under every discrete action up to this many actions; beyond it,
under this many per state (rotated so every action is taken). On UNO (61 actions, tape mode)
488 single-state calls took 16 s, so stepping 512 single states under all 61 would take ~17 min
per mutant (an estimate from that measurement, not a run)."""
SINGLE_ACTIONS_PER_STATE = 4
"""The same cap for states stepped one per call (measured on UNO: ~8 ms per pair of calls once
compiled)."""


@dataclass
class DifferentialResult:
    effort: str
    resets: int = 0
    reset_comparison: str = "exact"
    """exact, or distribution (sync mode: KS and support tests per component)"""
    transitions: int = 0
    differing: dict[str, int] = field(default_factory=dict)
    """Key -> number of compared resets/transitions in which it differed."""
    alone: dict[str, int] = field(default_factory=dict)
    """Of those, rows in which no state field differed: the output keys (``obs``, ``reward``,
    a flag) that showed the mutant while the state it reached was the same, counted per key."""
    rows_differing: int = 0
    """Resets/transitions that differed in any key."""
    rows_flag_only: int = 0
    """Of those, transitions (tolerance mode) that differ only in ``terminated``, where the
    mutant's flag is what the spec's termination predicate says of the mutant's own next
    state or of a state within tolerance of it: the comparison excuses exactly such threshold
    flips against any reference."""
    witness: dict[str, Any] | None = None
    """The first difference found: where, state, action, keys, original and mutant values."""
    error: str | None = None
    """The mutant raised or broke the contract (the original did not)."""
    inconclusive: str | None = None
    """The original itself failed on an input, so the comparison stopped early."""
    unconfirmed: int = 0
    """Step rows that differed per key but not in distribution (``differential_dist.py``)."""
    training_transitions: int = 0
    """Of ``transitions``, training steps compared (tape specs: ``differential_training.py``)."""

    @property
    def differs(self) -> bool:
        return bool(self.differing) or self.error is not None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = to_jsonable(asdict(self))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DifferentialResult:
        return cls(**data)


class MutantFailed(Exception):
    pass


class Differential:
    def __init__(self, original: Driver, mutant: Driver, seed: int = 0) -> None:
        self.original = original
        self.mutant = mutant
        self.spec = original.spec
        self.rng = np.random.default_rng([seed, 7])
        fields = self.spec.field_names
        self.suspects = StepSuspects(fields) if self.spec.rng.step == "distribution" else None

    def _note(self, result: DifferentialResult, keys: list[str], where: str, **info: Any) -> None:
        result.rows_differing += 1
        for k in keys:
            result.differing[k] = result.differing.get(k, 0) + 1
        count_alone(result.alone, keys, self.spec.field_names)
        if result.witness is None and keys:
            result.witness = to_jsonable({"where": where, "keys": keys, **info})

    def resets(self, n: int, result: DifferentialResult) -> None:
        seeds = np.concatenate([np.arange(n // 2), self.rng.integers(0, 2**32, n - n // 2)])
        seeds = seeds.astype(np.uint32)
        for start in range(0, n, BATCH):
            chunk = seeds[start : start + BATCH]
            expected = self.original.reset(chunk)
            try:
                actual = self.mutant.reset(chunk)
            except Exception as e:  # noqa: BLE001
                raise MutantFailed(f"reset raised {type(e).__name__}: {e}") from e
            result.resets += len(chunk)
            if self.spec.rng.mode == "sync":
                result.reset_comparison = "distribution"
                self._reset_distributions(expected, actual, result)
                continue
            diff = compare_states(self.spec, expected, actual)
            for i in np.flatnonzero(diff.mismatch):
                self._note(result, diff.keys_at(int(i)), "reset", seed=int(chunk[i]))

    def _reset_distributions(self, a: State, b: State, result: DifferentialResult) -> None:
        """Sync mode: resets are random draws, so only their distributions must agree (KS and
        support tests per component, as L1 does, and the paired shift test of the same seeds),
        and the mutant's must break the spec's ``valid`` rule no more often than the original's
        (``verify/reset_valid.py``, as L1 asks of a port)."""
        alpha = self.spec.verify.alpha / max(1, len(self.spec.state))
        invalid = invalid_first(self.spec, a, b)  # right field by field, wrong jointly
        if invalid is not None:
            keys = invalid.fields or ["reset"]
            self._note(result, keys, "reset breaks the spec's valid rule", test=invalid.clause)
        for f in self.spec.state:
            x = a[f.name].reshape(len(a[f.name]), -1).astype(np.float64)
            y = b[f.name].reshape(len(b[f.name]), -1).astype(np.float64)
            for j in range(x.shape[1]):
                if np.array_equal(x[:, j], y[:, j]):
                    continue
                slack = self.spec.tolerance(f.name)[0] if f.np_dtype.kind == "f" else 0.0
                p_ks = float(stats.ks_2samp(x[:, j], y[:, j]).pvalue)
                p_support, seen = support_pvalue(x[:, j], y[:, j], slack)
                p_paired = paired_shift_pvalue(x[:, j], y[:, j])
                p = 3 * min(p_ks, p_support, p_paired)
                if p < alpha:
                    test = "KS" if p_ks <= min(p_support, p_paired) else seen
                    test = "paired shift" if p_paired < min(p_ks, p_support) else test
                    self._note(result, [f.name], "reset distribution", test=test, p_value=p)

    def _actions(self, n: int, most: int = ACTIONS_PER_STATE) -> list[np.ndarray]:
        """Action batches to step ``n`` states under: every discrete action when there are at
        most ``most`` of them; else ``most`` distinct actions per state, rotated over the states
        so that every action is still taken (UNO's 61 actions cost 61 steps per state)."""
        if self.spec.action.type == "discrete":
            count = self.spec.action.n
            assert count is not None
            if count <= most:
                return [np.full(n, a, np.int32) for a in range(count)]
            first = self.rng.integers(0, count, n)
            stride = count // most
            return [((first + k * stride) % count).astype(np.int32) for k in range(most)]
        low, high = self.spec.action.bounds()
        edges = [
            np.broadcast_to(b, (n, *self.spec.action.shape)).astype(np.float32) for b in (low, high)
        ]
        return [random_actions(self.spec, self.rng, n) for _ in range(2)] + edges

    def step(
        self, state: State, actions: np.ndarray, result: DifferentialResult, where: str
    ) -> Transition:
        draws_differ = np.zeros(len(actions), dtype=bool)
        try:
            if self.spec.rng.step == "tape":
                # as the verifier's exact checks compare: the mutant replays the original's
                # draws (the training step, with its own generator, is compared afterwards)
                seeds = row_seeds(state, actions)
                a, drawn = self.original.step_draws(state, actions, seeds, None)
                b, mutant_drawn = self.mutant.step_draws(state, actions, seeds, drawn)
                draws_differ = account(drawn, mutant_drawn)[0]
            elif self.suspects is not None:
                # fresh keys per row, the same on both sides: a port's key derived from its
                # state (Blackjack's: from the card sums) would tie many rows to one draw
                seeds = self.rng.integers(0, 2**63, size=len(actions), dtype=np.uint64)
                a, _ = self.original.step_draws(state, actions, seeds, None)
                b, _ = self.mutant.step_draws(state, actions, seeds, None)
            else:
                a = self.original.step(state, actions)
                b = self.mutant.step(state, actions)
        except Exception as e:  # noqa: BLE001
            raise MutantFailed(f"step raised {type(e).__name__}: {e}") from e
        diff = compare_transitions(self.spec, a, b, state, actions)
        for only_draws in np.flatnonzero(draws_differ & ~diff.mismatch):
            before = {k: v[only_draws] for k, v in state.items()}
            self._note(result, ["draws"], where, state=before)
        result.transitions += len(actions)
        rows = np.flatnonzero(diff.mismatch)
        if len(rows):
            consistent = self._flag_follows_predicate(state, actions, b)
        if self.suspects is not None:
            self.suspects.observe(a, b)
        for row in rows:
            i = int(row)
            keys = diff.keys_at(i)
            if keys == ["terminated"] and consistent[i]:
                result.rows_flag_only += 1
            if keys:
                note = self._note if self.suspects is None else self._suspect
                note(
                    result,
                    keys,
                    where,
                    state={k: v[i] for k, v in state.items()},
                    action=actions[i],
                    original={k: value_at(a, k, i) for k in keys},
                    mutant={k: value_at(b, k, i) for k in keys},
                )
        return a

    def _suspect(
        self, result: DifferentialResult, keys: list[str], where: str, **info: Any
    ) -> None:
        """Distribution mode: a row that differs from the same key is only a suspect."""
        assert self.suspects is not None
        self.suspects.suspect(where, keys, **info)

    def _settle(self, result: DifferentialResult) -> None:
        if self.suspects is None:
            return
        how = self.suspects.settle(self.original, self.mutant, self.spec.verify.alpha)
        _record(result, self.suspects, how)

    def _training(self, effort: Effort, result: DifferentialResult) -> None:
        """Tape specs, nothing found so far: the training steps (``differential_training.py``)."""
        phase, how = run_phase(
            self.original,
            self.mutant,
            self.rng,
            effort.sampled_states,
            effort.rollout_envs,
            effort.rollout_steps,
            self._actions,
        )
        if phase is None:
            return
        result.transitions += phase.transitions
        result.training_transitions = phase.transitions
        _record(result, phase.suspects, how)

    def _flag_follows_predicate(
        self, before: State, actions: np.ndarray, tr: Transition
    ) -> np.ndarray:
        """Per env: tolerance mode, and ``terminated`` equals the spec's termination predicate
        evaluated on this transition's own next state or on one within tolerance of it."""
        if self.spec.compare.mode != "tolerance":
            return np.zeros(len(actions), dtype=bool)
        return follows_termination(self.spec, before, actions, tr, within_tolerance=True)

    def sampled(self, n: int, result: DifferentialResult) -> None:
        for start in range(0, n, BATCH):
            m = min(BATCH, n - start)
            state = sample_states(self.spec, self.rng, m)
            for actions in self._actions(m):
                self.step(state, actions, result, "sampled state")

    def singles(self, n: int, result: DifferentialResult) -> None:
        state = sample_states(self.spec, self.rng, n)
        for actions in self._actions(n, SINGLE_ACTIONS_PER_STATE):
            for i in range(n):
                one = take_state(state, slice(i, i + 1))
                self.step(one, actions[i : i + 1], result, "sampled state, stepped alone")

    def rollouts(self, envs: int, steps: int, result: DifferentialResult) -> None:
        seeds = self.rng.integers(0, 2**32, envs).astype(np.uint32)
        state = self.original.reset(seeds)
        for _ in range(steps):
            actions = random_actions(self.spec, self.rng, envs)
            tr = self.step(state, actions, result, "rollout state")
            state = reset_done(self.original, tr.state, tr.terminated | tr.truncated, self.rng)

    def boundaries(self, n: int, result: DifferentialResult) -> None:
        for start in range(0, n, BATCH):
            state, actions = boundary_states(
                self.spec, self.original, self.rng, min(BATCH, n - start)
            )
            if len(actions):
                self.step(state, actions, result, "state on a branch threshold")

    def all_seeds(self, result: DifferentialResult) -> None:
        from envforge.mutate.seeds import first_differing_seed, first_differing_seed_of_drivers

        if self.spec.rng.mode != "replicate":
            return
        # JAX modules (also behind a CheckedDriver) are compared on the device
        original = getattr(getattr(self.original, "inner", self.original), "module", None)
        mutant = getattr(getattr(self.mutant, "inner", self.mutant), "module", None)
        if hasattr(original, "to_canonical") and hasattr(mutant, "to_canonical"):
            assert original is not None and mutant is not None
            seed, checked = first_differing_seed(original, mutant)
        else:
            seed, checked = first_differing_seed_of_drivers(self.spec, self.original, self.mutant)
        result.resets += checked
        if seed is not None:
            seeds = np.array([seed], np.uint32)
            diff = compare_states(self.spec, self.original.reset(seeds), self.mutant.reset(seeds))
            self._note(result, diff.keys_at(0) or ["reset"], "reset (all seeds)", seed=seed)

    def run(self, effort: Effort, label: str) -> DifferentialResult:
        result = DifferentialResult(effort=label)
        try:
            self.resets(effort.reset_seeds, result)
            self.sampled(effort.sampled_states, result)
            self.singles(effort.single_states, result)
            self.rollouts(effort.rollout_envs, effort.rollout_steps, result)
            self.boundaries(effort.boundary_lines, result)
            self._settle(result)
            if not result.differing and self.spec.rng.step == "tape":
                self._training(effort, result)
            if effort.all_seeds and not result.differing:
                self.all_seeds(result)
        except (MutantFailed, MutantStepFailed) as e:
            result.error = str(e)[:500]
        except Exception as e:  # noqa: BLE001 - the original failed: no evidence either way
            result.inconclusive = f"original raised {type(e).__name__}: {str(e)[:300]}"
        return result


def _record(result: DifferentialResult, suspects: StepSuspects, how: str | None) -> None:
    """Settled suspects into the result: confirmed (``how``), they differ; else unconfirmed."""
    if how is None:
        result.unconfirmed += suspects.n
        return
    result.rows_differing += suspects.n
    for k, count in suspects.key_counts.items():
        result.differing[k] = result.differing.get(k, 0) + count
    for k, count in suspects.alone_counts.items():
        result.alone[k] = result.alone.get(k, 0) + count
    if result.witness is None:
        result.witness = to_jsonable({**suspects.rows[0], "confirmed": how})
