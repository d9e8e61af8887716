"""A one-dimensional point mass for trainer tests: push ``x`` towards 0 with a force in [-1, 1].

Written for envforge's tests (continuous actions, a port module with the JAX port contract).
Reward is ``-|x|`` after the move, so a policy that pushes against ``x`` scores near 0 and a
random one about -0.5 per step. Episodes last 50 steps.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

STEP = 0.1
LIMIT = 1.0
STEPS = 50


class EnvState(NamedTuple):
    x: jax.Array
    t: jax.Array


def reset(seed: jax.Array) -> EnvState:
    x = jax.random.uniform(jax.random.PRNGKey(seed), (), jnp.float32, -LIMIT, LIMIT)
    return EnvState(x, jnp.int32(0))


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    force = jnp.clip(jnp.reshape(action, ()), -1.0, 1.0)
    x = jnp.clip(state.x + STEP * force, -LIMIT, LIMIT)
    t = state.t + 1
    next_state = EnvState(x, t)
    return next_state, observe(next_state), -jnp.abs(x), jnp.bool_(False), t >= STEPS


def observe(state: EnvState) -> jax.Array:
    return jnp.reshape(state.x, (1,))


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(jnp.asarray(fields["x"], jnp.float32), jnp.asarray(fields["t"], jnp.int32))
