"""``envforge.make(env, target="c")``: a C port's batch of structs, stepped in one call.

The batch is the C port's driver (``backends/c_port.py``) holding its envs as a numpy array
of the port's struct: ``reset`` and ``step`` are one ctypes call each over the whole batch.
It runs the port in the caller's process, as ``envforge.make`` does for every target.

A port of a spec whose reference draws inside ``step`` (``[rng] step``) takes its draws
through the draw hook (``native/c_draws.py``): here each env draws from its own generator
(xoshiro256++, four words a row kept beside the structs), seeded from the env's seed at every
reset, as a Rust port's ``EnvBatch`` does; nothing is logged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envforge.backends.c_port import CPortDriver
from envforge.spec import EnvSpec

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class CBatch:
    """A C port's envs, as ``envs.batches.PortBatch`` describes (reset where ``rows``, step all)."""

    def __init__(self, spec: EnvSpec, port: Path, num_envs: int, strict_float: bool) -> None:
        self.driver = CPortDriver(spec, port, strict_float=strict_float)
        self.num_envs = num_envs
        self.envs = self.driver.reset_structs(np.zeros(num_envs, np.uint32))
        # each env's own generator under the draw hook, seeded at reset
        self.gens = np.zeros((num_envs, 4), np.uint64) if self.driver.hooked else None
        self._seed_gens(np.zeros(num_envs, np.uint32), None)

    def _seed_gens(self, seeds: np.ndarray, rows: np.ndarray | None) -> None:
        if self.gens is None:
            return
        fresh = np.zeros((len(seeds), 4), np.uint64)
        keys = np.ascontiguousarray(seeds, dtype=np.uint64)
        self.driver.lib.envforge_seed_own(len(keys), keys.ctypes.data, fresh.ctypes.data)
        if rows is None:
            self.gens = fresh
        else:
            self.gens[rows] = fresh[rows]

    def reset(self, seeds: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        seeds = np.asarray(seeds, dtype=np.uint32)
        if rows is None:
            self.envs = self.driver.reset_structs(seeds)
        else:
            rows = np.asarray(rows, dtype=bool)
            self.envs[rows] = self.driver.reset_structs(seeds[rows])
        self._seed_gens(seeds, rows)
        return self.driver.observe_structs(self.envs)

    def step(self, actions: np.ndarray) -> Arrays:
        if self.gens is None:
            tr = self.driver.step_structs(self.envs, actions)
            return tr.obs, tr.reward.astype(np.float32), tr.terminated, tr.truncated
        n = len(self.envs)
        dtype = np.int32 if self.driver.spec.action.type == "discrete" else np.float32
        acts = np.ascontiguousarray(actions, dtype=dtype)
        reward = np.zeros(n, np.float32)
        term, trunc = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        self.driver.lib.envforge_step_own(
            n,
            self.envs.ctypes.data,
            acts.ctypes.data,
            reward.ctypes.data,
            term.ctypes.data,
            trunc.ctypes.data,
            self.gens.ctypes.data,
        )
        return self.driver.observe_structs(self.envs), reward, term.astype(bool), trunc.astype(bool)


def c_batch(spec: EnvSpec, port: Path, num_envs: int, strict_float: bool) -> CBatch:
    return CBatch(spec, port, num_envs, strict_float)
