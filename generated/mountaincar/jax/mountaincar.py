"""MountainCar-v0 in JAX, ported by hand from gymnasium 1.4.0 ``envs/classic_control/mountain_car.py``.

Discrete push left / none / right; velocity and position are clipped, and a car that reaches
the left wall (``position == min_position``) while moving left stops dead (velocity 0). The
episode terminates at ``position >= 0.5`` with non-negative velocity; truncation after 200
steps is computed from ``time`` exactly as gymnasium's TimeLimit wrapper does. The reference
computes in float64; this port is float32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# the reference's constants, by its names (MountainCarEnv.__init__)
MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.5
GOAL_VELOCITY = 0.0
FORCE = 0.001
GRAVITY = 0.0025
MAX_EPISODE_STEPS = 200  # the TimeLimit wrapper's max_episode_steps


class EnvState(NamedTuple):
    position: jax.Array
    velocity: jax.Array
    time: jax.Array  # steps since reset: the TimeLimit wrapper's counter


def reset(seed: jax.Array) -> EnvState:
    key = jax.random.PRNGKey(seed)
    position = jax.random.uniform(key, (), jnp.float32, -0.6, -0.4)
    return EnvState(position, jnp.float32(0.0), jnp.int32(0))


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    position, velocity = state.position, state.velocity
    velocity = velocity + (action - 1) * FORCE + jnp.cos(3 * position) * (-GRAVITY)
    velocity = jnp.clip(velocity, -MAX_SPEED, MAX_SPEED)
    position = position + velocity
    position = jnp.clip(position, MIN_POSITION, MAX_POSITION)
    # the left wall is inelastic: the reference zeroes a leftward velocity there
    velocity = jnp.where((position == MIN_POSITION) & (velocity < 0), 0.0, velocity)
    terminated = (position >= GOAL_POSITION) & (velocity >= GOAL_VELOCITY)
    time = state.time + 1
    new_state = EnvState(position.astype(jnp.float32), velocity.astype(jnp.float32), time)
    truncated = time >= MAX_EPISODE_STEPS
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
