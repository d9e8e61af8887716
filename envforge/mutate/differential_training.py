"""The differential's training phase (tape specs): the mutant's training step against the
original's, before a mutant is called equivalent.

Under ``[rng] step = "tape"`` the differential compares ``step_with_draws`` with the original's
draws replayed, so a mutation on the path only training takes (a JAX port's ``step``, drawing
from its own key: UNO's lazy deal) made no difference there, and such a mutant that the
verifier missed was judged equivalent. Here both sides take their training step
(``Driver.step_training``) from the same states with the same per-row seeds, shuffled piles
shuffled the same way (``verify/training_path.py``): sampled states under several actions, and
states along the original's own training rollouts. As in distribution mode
(``differential_dist.py``), a row that differs is only a suspect (a mutant that re-keys a
draw deals another card from the same distribution); the mutant differs when the paired shift
or the resampled suspects confirm it. It runs only when the tape phases found no difference:
a mutant they already tell apart needs no more evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition
from envforge.mutate.differential_dist import KEEP_ROWS, StepSuspects, reset_done, value_at
from envforge.verify.compare import compare_transitions
from envforge.verify.policies import random_actions
from envforge.verify.strategies import sample_states
from envforge.verify.training_path import Sampled, has_training_path

SAMPLED_SHARE = 4
"""The training phase steps ``sampled_states // SAMPLED_SHARE`` sampled states ..."""
ROLLOUT_SHARE = 2
"""... and ``rollout_envs // ROLLOUT_SHARE`` envs for ``rollout_steps // ROLLOUT_SHARE`` steps."""
BATCH = 4096


class MutantStepFailed(Exception):
    """The mutant's training step raised (the original's did not)."""


Inputs = Iterator[tuple[State, np.ndarray, str]]


def both_have_training_path(original: Driver, mutant: Driver) -> bool:
    """Whether both sides have a training step of their own (one row tried on each)."""
    state = original.reset(np.zeros(1, np.uint32))
    action = random_actions(original.spec, np.random.default_rng(0), 1)
    if not has_training_path(original, state, action):
        return False
    try:
        return has_training_path(mutant, state, action)
    except Exception as e:  # noqa: BLE001
        raise MutantStepFailed(f"training step raised {type(e).__name__}: {e}") from e


def _sampled(
    driver: Driver, rng: np.random.Generator, n: int, actions: Callable[[int], list]
) -> Inputs:
    for start in range(0, n, BATCH):
        m = min(BATCH, n - start)
        state = sample_states(driver.spec, rng, m)
        for acts in actions(m):
            yield state, acts, "sampled state (training step)"


class TrainingPhase:
    def __init__(self, original: Driver, mutant: Driver, rng: np.random.Generator) -> None:
        self.spec = original.spec
        self.original, self.mutant = original, mutant
        self.sides = Sampled(original, True), Sampled(mutant, True)
        self.rng = rng
        self.suspects = StepSuspects(self.spec.field_names)
        self.transitions = 0
        self.fired: dict[str, int] = {}
        """Spec event -> compared rows where it fired on the original's training step."""
        self.at_events: list[tuple[list[str], dict[str, Any]]] = []
        """Suspects (up to ``KEEP_ROWS``) where an event fired, and which."""

    def _events(self, state: State, actions: np.ndarray, tr: Transition) -> list[list[str]]:
        fired: list[list[str]] = [[] for _ in range(len(actions))]
        for event in self.spec.event:
            expr = self.spec.expression(event.expr)
            hit = np.broadcast_to(
                np.asarray(expr(**tr.expression_inputs(state, actions))), (len(actions),)
            )
            self.fired[event.name] = self.fired.get(event.name, 0) + int(hit.sum())
            for i in np.flatnonzero(hit):
                fired[int(i)].append(event.name)
        return fired

    def step(self, state: State, actions: np.ndarray, where: str) -> Transition:
        """Both training steps from ``state`` with the same seeds; the original's transition."""
        seeds = self.rng.integers(0, 2**63, size=len(actions), dtype=np.uint64)
        a, _ = self.sides[0].step_draws(state, actions, seeds, None)
        try:
            b, _ = self.sides[1].step_draws(state, actions, seeds, None)
        except Exception as e:  # noqa: BLE001
            raise MutantStepFailed(f"training step raised {type(e).__name__}: {e}") from e
        self.transitions += len(actions)
        self.suspects.observe(a, b)
        diff = compare_transitions(self.spec, a, b, state, actions)
        events = self._events(state, actions, a)
        for row in np.flatnonzero(diff.mismatch):
            i = int(row)
            keys = diff.keys_at(i)
            info = {
                "state": {k: v[i] for k, v in state.items()},
                "action": actions[i],
                "original": {k: value_at(a, k, i) for k in keys},
                "mutant": {k: value_at(b, k, i) for k in keys},
            }
            self.suspects.suspect(where, keys, **info)
            if events[i] and len(self.at_events) < KEEP_ROWS:
                self.at_events.append((events[i], {"where": where, "keys": keys, **info}))
        return a

    def rollouts(self, envs: int, steps: int) -> None:
        if envs < 1:
            return
        state = self.original.reset(self.rng.integers(0, 2**32, envs).astype(np.uint32))
        for _ in range(steps):
            actions = random_actions(self.spec, self.rng, envs)
            tr = self.step(state, actions, "rollout state (training step)")
            state = reset_done(self.original, tr.state, tr.terminated | tr.truncated, self.rng)

    def settle(self) -> tuple[str | None, int]:
        """How the training steps differ in distribution (None: they do not), and the rows.
        The suspects resampled first are those where the rarest spec event fired: a mutation
        on a rare branch (UNO's deal from a reshuffled pile) differs in distribution only
        there, while its rows elsewhere (a lazy deal from another card of a shuffled pile)
        are suspects that agree in distribution."""

        def rarity(item: tuple[list[str], dict[str, Any]]) -> int:
            return min(self.fired.get(e, 0) for e in item[0])

        first = [row for _, row in sorted(self.at_events, key=rarity)]
        self.suspects.rows = first + self.suspects.rows  # resampling skips a state seen twice
        return self.suspects.settle(*self.sides, self.spec.verify.alpha), self.suspects.n


def run_phase(
    original: Driver,
    mutant: Driver,
    rng: np.random.Generator,
    sampled_states: int,
    rollout_envs: int,
    rollout_steps: int,
    actions: Callable[[int], list],
) -> tuple[TrainingPhase | None, str | None]:
    """The phase at the given effort: (the phase, how the mutant differs); (None, None) when
    either side has no training step of its own."""
    if not both_have_training_path(original, mutant):
        return None, None
    phase = TrainingPhase(original, mutant, rng)
    for state, acts, where in _sampled(original, rng, sampled_states // SAMPLED_SHARE, actions):
        phase.step(state, acts, where)
    phase.rollouts(rollout_envs // ROLLOUT_SHARE, rollout_steps // ROLLOUT_SHARE)
    how, _ = phase.settle()
    return phase, how
