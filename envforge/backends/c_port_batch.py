"""``envforge.make(env, target="c")``: a C port's batch of structs, stepped in one call.

The batch is the C port's driver (``backends/c_port.py``) holding its envs as a numpy array
of the port's struct: ``reset`` and ``step`` are one ctypes call each over the whole batch.
It runs the port in the caller's process, as ``envforge.make`` does for every target.
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

    def reset(self, seeds: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        seeds = np.asarray(seeds, dtype=np.uint32)
        if rows is None:
            self.envs = self.driver.reset_structs(seeds)
        else:
            rows = np.asarray(rows, dtype=bool)
            self.envs[rows] = self.driver.reset_structs(seeds[rows])
        return self.driver.observe_structs(self.envs)

    def step(self, actions: np.ndarray) -> Arrays:
        tr = self.driver.step_structs(self.envs, actions)
        return tr.obs, tr.reward.astype(np.float32), tr.terminated, tr.truncated


def c_batch(spec: EnvSpec, port: Path, num_envs: int, strict_float: bool) -> CBatch:
    return CBatch(spec, port, num_envs, strict_float)
