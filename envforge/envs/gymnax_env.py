"""A JAX port with gymnax's functional API: ``reset(key, params)``, ``step(key, state, action,
params)``, ``observation_space(params)``, ``action_space(params)``, ``default_params``.

Pure and jit/vmap-able (nothing is jitted here: jit the training loop, as PureJaxRL does). The
state is the training wrapper's ``Episode`` (the port's own state, the episode's length and
return); ``step`` auto-resets in the same call, as gymnax does, through
``train/port_env.AutoResetEnv``: where an episode ends the returned observation and state are a
new episode's, from a port seed drawn from ``key``. The step's own outputs stay in ``info``:
``final_obs``, ``terminated``, ``truncated`` (not terminated; the flag to bootstrap on),
``episode_return``/``episode_length`` (meaningful where ``done``) and ``discount``.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envforge.spec import EnvSpec
from envforge.train.port_env import AutoResetEnv, Episode


class EnvParams(NamedTuple):
    """What a gymnax env takes as ``params``. The port's physics constants are part of its
    code (that is what was verified); only the episode cap can be changed."""

    max_steps_in_episode: int


class Discrete:
    """gymnax-style discrete space: actions ``0 .. n - 1``."""

    def __init__(self, num_categories: int) -> None:
        self.n = num_categories
        self.shape: tuple[int, ...] = ()
        self.dtype = jnp.int32

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n, dtype=self.dtype)

    def contains(self, x: Any) -> jax.Array:
        return jnp.logical_and(x >= 0, x < self.n)


class Box:
    """gymnax-style box space; ``sample`` draws uniformly where both bounds are finite and from a
    standard normal where one is not."""

    def __init__(self, low: np.ndarray, high: np.ndarray, shape: tuple[int, ...], dtype: Any):
        self.low = jnp.asarray(np.broadcast_to(low, shape), dtype)
        self.high = jnp.asarray(np.broadcast_to(high, shape), dtype)
        self.shape = shape
        self.dtype = dtype

    def sample(self, key: jax.Array) -> jax.Array:
        finite = jnp.isfinite(self.low) & jnp.isfinite(self.high)
        low = jnp.where(finite, self.low, 0)
        high = jnp.where(finite, self.high, 1)
        uniform = jax.random.uniform(key, self.shape, self.dtype, low, high)
        return jnp.where(finite, uniform, jax.random.normal(key, self.shape, self.dtype))

    def contains(self, x: Any) -> jax.Array:
        return jnp.all((x >= self.low) & (x <= self.high))


class GymnaxEnv:
    """One env of a JAX port, gymnax style (vmap it for a batch)."""

    def __init__(self, module: ModuleType, spec: EnvSpec) -> None:
        self.module = module
        self.spec = spec
        self._core = AutoResetEnv(module, spec.episode_cap)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def default_params(self) -> EnvParams:
        return EnvParams(max_steps_in_episode=self.spec.episode_cap)

    @property
    def num_actions(self) -> int:
        n = self.spec.action.n if self.spec.action.type == "discrete" else None
        return n if n is not None else int(np.prod(self.spec.action.shape))

    def _params(self, params: EnvParams | None) -> EnvParams:
        return self.default_params if params is None else params

    def reset(self, key: jax.Array, params: EnvParams | None = None) -> tuple[jax.Array, Episode]:
        episode, obs = self._core.reset(key)
        return obs, episode

    def step(
        self, key: jax.Array, state: Episode, action: Any, params: EnvParams | None = None
    ) -> tuple[jax.Array, Episode, jax.Array, jax.Array, dict[str, jax.Array]]:
        cap = self._params(params).max_steps_in_episode
        core = dataclasses.replace(self._core, episode_cap=cap)
        next_state, res = core.step(key, state, action)
        info = {
            "final_obs": res.final_obs,
            "terminated": res.terminated,
            "truncated": res.truncated,
            "episode_return": res.episode_return,
            "episode_length": res.episode_length,
            "discount": 1.0 - res.terminated.astype(jnp.float32),
        }
        return res.obs, next_state, res.reward, res.done, info

    def observation_space(self, params: EnvParams | None = None) -> Box:
        low, high = self.spec.observation.bounds()
        dtype = jnp.dtype(self.spec.observation.dtype)
        return Box(low, high, tuple(self.spec.observation.shape), dtype)

    def action_space(self, params: EnvParams | None = None) -> Discrete | Box:
        if self.spec.action.type == "discrete":
            return Discrete(self.num_actions)
        low, high = self.spec.action.bounds()
        return Box(low, high, tuple(self.spec.action.shape), jnp.float32)

    def __repr__(self) -> str:
        return f"GymnaxEnv({self.spec.name})"
