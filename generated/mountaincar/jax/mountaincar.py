"""MountainCar-v0 in JAX, ported by hand from gymnasium 1.4.0 ``envs/classic_control/mountain_car.py``.

Discrete push left / none / right; velocity and position are clipped, and a car that reaches
the left wall (``position == min_position``) while moving left stops dead (velocity 0). The
episode terminates at ``position >= 0.5`` with non-negative velocity; truncation after 200
steps is computed from ``time`` exactly as gymnasium's TimeLimit wrapper does. The reference
computes in float64; this port is float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class EnvParams:
    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = 0.07
    goal_position: float = 0.5
    goal_velocity: float = 0.0
    force: float = 0.001
    gravity: float = 0.0025
    max_episode_steps: int = 200


PARAMS = EnvParams()


class EnvState(NamedTuple):
    position: jax.Array
    velocity: jax.Array
    time: jax.Array  # steps since reset: the TimeLimit wrapper's counter


def reset(seed: jax.Array, params: EnvParams = PARAMS) -> EnvState:
    key = jax.random.PRNGKey(seed)
    position = jax.random.uniform(key, (), jnp.float32, -0.6, -0.4)
    return EnvState(position, jnp.float32(0.0), jnp.int32(0))


def step(
    state: EnvState, action: jax.Array, params: EnvParams = PARAMS
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    position, velocity = state.position, state.velocity
    velocity = velocity + (action - 1) * params.force + jnp.cos(3 * position) * (-params.gravity)
    velocity = jnp.clip(velocity, -params.max_speed, params.max_speed)
    position = position + velocity
    position = jnp.clip(position, params.min_position, params.max_position)
    # the left wall is inelastic: the reference zeroes a leftward velocity there
    velocity = jnp.where((position == params.min_position) & (velocity < 0), 0.0, velocity)
    terminated = (position >= params.goal_position) & (velocity >= params.goal_velocity)
    time = state.time + 1
    new_state = EnvState(position.astype(jnp.float32), velocity.astype(jnp.float32), time)
    truncated = time >= params.max_episode_steps
    return new_state, observe(new_state), jnp.float32(-1.0), terminated, truncated


def observe(state: EnvState) -> jax.Array:
    return jnp.stack([state.position, state.velocity]).astype(jnp.float32)


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(
        position=jnp.asarray(fields["position"], jnp.float32),
        velocity=jnp.asarray(fields["velocity"], jnp.float32),
        time=jnp.asarray(fields["time"], jnp.int32),
    )
