"""A JAX port module as a training environment: auto-reset and episode bookkeeping, pure JAX.

Ports implement only single-env physics (``reset(seed)``, ``step(state, action)``,
``observe(state)``); episode boundaries are the trainer's. This wrapper resets an env in the same
step it finishes (keeping the final observation for value bootstrapping), truncates at the spec's
``episode_cap`` and tracks each episode's return and length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from envforge.backends.jax import check_port_module, find_port_module, load_module


class Episode(NamedTuple):
    env: Any
    """The port's own state pytree."""
    length: jax.Array
    ret: jax.Array


class StepResult(NamedTuple):
    obs: jax.Array
    """Observation to act on next (a fresh episode's first one after a boundary)."""
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    """Observation the finished step produced, before any auto-reset."""
    episode_return: jax.Array
    """Return of the episode that ended with this step (meaningful where done)."""
    episode_length: jax.Array

    @property
    def done(self) -> jax.Array:
        return self.terminated | self.truncated


@dataclass(frozen=True)
class AutoResetEnv:
    module: ModuleType
    episode_cap: int

    def reset(self, key: jax.Array) -> tuple[Episode, jax.Array]:
        seed = jax.random.bits(key, (), jnp.uint32)
        state = self.module.reset(seed)
        episode = Episode(state, jnp.int32(0), jnp.float32(0.0))
        return episode, jnp.asarray(self.module.observe(state))

    def step(
        self, key: jax.Array, episode: Episode, action: jax.Array
    ) -> tuple[Episode, StepResult]:
        state, obs, reward, terminated, truncated = self.module.step(episode.env, action)
        reward = jnp.asarray(reward, jnp.float32)
        terminated = jnp.asarray(terminated, bool)
        length = episode.length + 1
        truncated = ~terminated & (jnp.asarray(truncated, bool) | (length >= self.episode_cap))
        ret = episode.ret + reward
        done = terminated | truncated

        fresh, fresh_obs = self.reset(key)
        running = Episode(state, length, ret)
        next_episode = jax.tree_util.tree_map(lambda f, r: jnp.where(done, f, r), fresh, running)
        obs = jnp.asarray(obs)
        result = StepResult(
            obs=jnp.where(done, fresh_obs, obs),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=obs,
            episode_return=ret,
            episode_length=length,
        )
        return next_episode, result


def load_port(port: Path | str, env_name: str) -> ModuleType:
    """Import a JAX port module (a file, or a directory holding ``<env>.py``) and check its API."""
    path = find_port_module(Path(port), env_name)
    module = load_module(path)
    check_port_module(module, path)
    return module
