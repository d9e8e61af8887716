"""A Driver whose every output is checked against the spec before a level compares it.

L0 inspects raw driver outputs itself. Later levels compare states, observations and flags; a
port that returns a wrong shape must then fail the level with a ``contract`` finding (the
runner turns the ContractViolation into one), not crash the comparison with a numpy error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envforge.backends.base import (
    Driver,
    State,
    Transition,
    batch_size,
    canonicalize,
    check_transition,
)
from envforge.coverage.lines import LineCoverage
from envforge.errors import ContractViolation
from envforge.rng.draws import DrawLog


class CheckedDriver(Driver):
    def __init__(self, inner: Driver) -> None:
        super().__init__(inner.spec)
        self.inner = inner
        self.side = inner.side

    def reset(self, seeds: np.ndarray) -> State:
        return canonicalize(self.spec, self.inner.reset(seeds), self.side, "reset")

    def step(self, state: State, actions: np.ndarray) -> Transition:
        return check_transition(self.spec, self.inner.step(state, actions), len(actions), self.side)

    def step_sequence(
        self, state: State, actions: np.ndarray, until_done: bool = False
    ) -> list[Transition]:
        out = self.inner.step_sequence(state, actions, until_done)
        wanted = range(min(1, len(actions)), len(actions) + 1) if until_done else [len(actions)]
        if not isinstance(out, list) or len(out) not in wanted:
            raise ContractViolation(
                self.side, "step_sequence", f"returned no transitions for {len(actions)} actions"
            )
        n = batch_size(state)
        return [check_transition(self.spec, tr, n, self.side) for tr in out]

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        tr, log = self.inner.step_draws(state, actions, seeds, tape)
        if not isinstance(log, DrawLog) or log.count.shape != (len(actions),):
            raise ContractViolation(self.side, "step_draws", "returned no draw log for the batch")
        return check_transition(self.spec, tr, len(actions), self.side), log

    def step_training(
        self, state: State, actions: np.ndarray, seeds: np.ndarray
    ) -> Transition | None:
        tr = self.inner.step_training(state, actions, seeds)
        return None if tr is None else check_transition(self.spec, tr, len(actions), self.side)

    def observe(self, state: State) -> np.ndarray:
        obs = np.asarray(self.inner.observe(state))
        expected = (len(next(iter(state.values()))), *self.spec.observation.shape)
        if obs.shape != expected:
            raise ContractViolation(
                self.side, "observe", f"observation shape {obs.shape}, expected {expected}"
            )
        return obs.astype(self.spec.observation.dtype, copy=False)

    def explain(self, state: State, actions: np.ndarray) -> list[str] | None:
        return self.inner.explain(state, actions)

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        return self._checked_digests(self.inner.reset_digest(seeds, block), len(seeds), block)

    def reset_digest_range(self, start: int, count: int, block: int) -> np.ndarray:
        digests = self.inner.reset_digest_range(start, count, block)
        return self._checked_digests(digests, count, block)

    def _checked_digests(self, result: np.ndarray, count: int, block: int) -> np.ndarray:
        digests = np.asarray(result)
        expected = (-(-count // block),)
        if digests.shape != expected or digests.dtype != np.uint64:
            raise ContractViolation(
                self.side,
                "reset_digest",
                f"digest array {digests.dtype}{list(digests.shape)}, expected uint64{list(expected)}",
            )
        return digests

    def coverage_start(self) -> bool:
        return self.inner.coverage_start()

    def coverage_read(self) -> list[LineCoverage] | None:
        return self.inner.coverage_read()

    def reset_fingerprint(self) -> str | None:
        return self.inner.reset_fingerprint()

    def source_files(self) -> list[Path]:
        return self.inner.source_files()

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()
