"""The original C reference for the self-check: whole structs, every member carried along.

The C Driver writes only the canonical fields into a zeroed struct before each step. Here the
structs the reference reset are kept whole and stepped in place, so a member the spec leaves
out keeps its value as it does for a user of the reference. A member that explains a
difference is found by copying it from the original struct into the reloaded one.
"""

from __future__ import annotations

import numpy as np

from envforge.backends.base import State, Transition
from envforge.backends.c import CDriver
from envforge.verify.compare import compare_transitions


class CLive:
    """``n`` structs of a C reference, reset and stepped by its own library."""

    def __init__(self, driver: CDriver, n: int) -> None:
        self.driver = driver
        self.structs = np.zeros(n, dtype=driver.dtype)

    def reset(self, seeds: np.ndarray) -> tuple[State, np.ndarray]:
        self.structs = self.driver.reset_structs(seeds)
        return self.read(np.arange(len(seeds))), self.driver.observe_structs(self.structs)

    def read(self, rows: np.ndarray) -> State:
        return self.driver.canonical_of(self.structs[rows])

    def step(self, rows: np.ndarray, actions: np.ndarray, before: State) -> Transition:
        envs = self.structs[rows]  # a copy: fancy indexing
        tr = self.driver.step_structs(envs, actions)
        self.structs[rows] = envs
        return tr

    def replay(self, i: int, seed: int, actions: list[np.ndarray]) -> None:
        self.structs[i] = self.driver.reset_structs(np.array([seed], np.uint32))[0]
        for a in actions:
            self.step(np.array([i]), np.asarray(a)[None], {})

    def explain(
        self, i: int, before: State, action: np.ndarray, expected: Transition
    ) -> tuple[list[str], list[str], dict[str, tuple[str, str]]]:
        """Members outside the canonical state that explain the difference (see live.py)."""
        original = self.structs[i : i + 1].copy()
        reloaded = self.driver.structs_of(before)
        mapped = set(self.driver.field_map.values())
        names = self.driver.dtype.names or ()
        suspects = [
            m for m in names if m not in mapped and not np.array_equal(original[m], reloaded[m])
        ]
        values = {m: (_shown(original[m][0]), _shown(reloaded[m][0])) for m in suspects}

        def agrees_with(members: list[str]) -> bool:
            envs = self.driver.structs_of(before)
            for m in members:
                envs[m] = original[m]
            got = self.driver.step_structs(envs, np.asarray(action)[None])
            return compare_transitions(self.driver.spec, expected, got).first() is None

        causes = [m for m in suspects if agrees_with([m])]
        if not causes and suspects and agrees_with(suspects):
            causes = list(suspects)
        return causes, [m for m in suspects if m not in causes], values

    def close(self) -> None:
        pass


def _shown(value: np.ndarray) -> str:
    a = np.asarray(value)
    return repr(a.item()) if a.ndim == 0 else np.array2string(a, threshold=8)
