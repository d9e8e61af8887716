"""envforge's port contract around a third-party JAX FrozenLake (``lakejax``, docs/THIRD_PARTY.md):
the library's own code and its own ``jax.random`` draws, unchanged."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from lakejax import EnvState as LakeState
from lakejax import FrozenLake

ENV, PARAMS = FrozenLake(), FrozenLake().default_params


class EnvState(NamedTuple):
    lake: LakeState  # the library's state
    key: jax.Array  # a key for training's step(state, action)


class Draws(NamedTuple):  # what step passes step_with_draws: a key
    key: jax.Array


def reset(seed: jax.Array) -> EnvState:
    key, sub = jax.random.split(jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32)))
    return EnvState(ENV.reset_env(sub, PARAMS)[1], key)


def observe(state: EnvState) -> jax.Array:
    return ENV.get_obs(state.lake).astype(jnp.float32)


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the library draws from the key the driver seeded (``draws.key``)."""
    _, lake, reward, _, info = ENV.step_env(draws.key, state.lake, action, PARAMS)
    new = EnvState(lake, state.key)
    reward = reward.astype(jnp.float32)
    return new, observe(new), reward, info["ended"], info["time_limit"], draws


def step(state: EnvState, action: jax.Array) -> tuple:
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated, _ = step_with_draws(state, action, Draws(sub))
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"s": state.lake.row * 8 + state.lake.col, "time": state.lake.time}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    s, time = jnp.asarray(fields["s"], jnp.int32), jnp.asarray(fields["time"], jnp.int32)
    return EnvState(LakeState(s // 8, s % 8, time), jax.random.fold_in(jax.random.PRNGKey(0), s))
