"""A port's whole batch of envs behind one small interface, for the gymnasium envs in this package.

``reset(seeds, rows)`` resets the envs where ``rows`` is true (all when None) from their port
seeds and returns every env's observation; ``step(actions)`` steps every env once and returns new
numpy arrays of observations, rewards and flags, exactly as the port computed them. No episode
logic lives here: auto-reset and the episode cap are the envs' (``vector.py``, ``single.py``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from envforge.spec import EnvSpec

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class PortBatch(Protocol):
    num_envs: int

    def reset(self, seeds: np.ndarray, rows: np.ndarray | None) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> Arrays: ...


class RustBatch:
    """A Rust port's ``EnvBatch`` (PyO3, rayon across envs) stepping into fresh numpy buffers."""

    def __init__(self, spec: EnvSpec, crate: Path, num_envs: int, strict_float: bool) -> None:
        from envforge.backends.rust import BATCH_CLASS, RustDriver

        # the backend builds (or takes from its cache), loads and checks the extension
        driver = RustDriver(spec, crate, strict_float=strict_float)
        self._batch_class = getattr(driver.module, BATCH_CLASS)
        self._strict_float = strict_float
        self._batch: Any = self._batch_class(num_envs, strict_float=strict_float)
        self.spec = spec
        self.num_envs = num_envs
        self.describe = driver.describe()

    def _obs(self) -> np.ndarray:
        return np.empty((self.num_envs, *self.spec.observation.shape), self.spec.observation.dtype)

    def reset(self, seeds: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
        if rows is None or rows.all():
            self._batch.reset(seeds)
        elif hasattr(self._batch, "reset_where"):
            self._batch.reset_where(np.ascontiguousarray(rows, dtype=bool), seeds)
        else:  # reset_where is optional in the port contract: reset aside, copy the rows in
            fresh = self._batch_class(0, strict_float=self._strict_float)
            fresh.reset(seeds[rows])
            state, new = dict(self._batch.get_state()), dict(fresh.get_state())
            for name, column in state.items():
                column = np.array(column)
                column[rows] = new[name]
                state[name] = column
            self._batch.set_state(state)
        obs = self._obs()
        self._batch.observe(obs)
        return obs

    def step(self, actions: np.ndarray) -> Arrays:
        n = self.num_envs
        obs, reward = self._obs(), np.empty(n, np.float32)
        terminated, truncated = np.empty(n, bool), np.empty(n, bool)
        self._batch.step(actions, obs, reward, terminated, truncated)
        return obs, reward, terminated, truncated


class JaxBatch:
    """A JAX port's single-env functions, vmapped and jitted once, with the states on the device."""

    def __init__(self, module: ModuleType, num_envs: int) -> None:
        import jax
        import jax.numpy as jnp

        def reset_rows(state: Any, seeds: Any, rows: Any) -> tuple[Any, Any]:
            fresh = jax.vmap(module.reset)(seeds)
            state = jax.tree_util.tree_map(
                lambda f, s: jnp.where(rows.reshape(rows.shape + (1,) * (s.ndim - 1)), f, s),
                fresh,
                state,
            )
            return state, jax.vmap(module.observe)(state)

        def reset_all(seeds: Any) -> tuple[Any, Any]:
            state = jax.vmap(module.reset)(seeds)
            return state, jax.vmap(module.observe)(state)

        def step(state: Any, actions: Any) -> tuple[Any, ...]:
            return tuple(jax.vmap(module.step)(state, actions))

        self._reset_rows = jax.jit(reset_rows)
        self._reset_all = jax.jit(reset_all)
        self._step = jax.jit(step)
        self._state: Any = None
        self.num_envs = num_envs
        self.describe = f"JAX port {getattr(module, '__file__', module.__name__)}"

    def reset(self, seeds: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        # numpy straight into the jitted calls: their own transfer is the fast one, and
        # jnp.asarray of a numpy array compiles an identity computation for every new shape
        on_device = np.asarray(seeds, dtype=np.uint32)
        if rows is None or self._state is None or rows.all():
            self._state, obs = self._reset_all(on_device)
        else:
            self._state, obs = self._reset_rows(self._state, on_device, np.asarray(rows))
        return np.array(obs)

    def step(self, actions: np.ndarray) -> Arrays:
        self._state, obs, reward, terminated, truncated = self._step(
            self._state, np.asarray(actions)
        )
        # copies: numpy views of device buffers would be read-only for the caller
        return (
            np.array(obs),
            np.array(reward),
            np.array(terminated, dtype=bool),
            np.array(truncated, dtype=bool),
        )
