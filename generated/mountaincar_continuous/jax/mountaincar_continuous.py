"""MountainCarContinuous-v0 in JAX, ported by hand from gymnasium 1.4.0
``envs/classic_control/continuous_mountain_car.py``.

The force is the action clipped to [-1, 1], but the reward charges ``0.1 * action**2`` on the
*unclipped* action, as the reference does. Goal at ``position >= 0.45`` with non-negative
velocity pays +100 and terminates. A car reaching the left wall while moving left stops dead.
Truncation after 999 steps is computed from ``time`` exactly as gymnasium's TimeLimit wrapper
does. The reference stores its state as float32 after every step (and, with NumPy 2's
promotion rules, then computes in float32 too), so this float32 port matches it closely.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# the reference's constants, by its names (Continuous_MountainCarEnv.__init__)
MIN_ACTION = -1.0
MAX_ACTION = 1.0
MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.45
GOAL_VELOCITY = 0.0
POWER = 0.0015
MAX_EPISODE_STEPS = 999  # the TimeLimit wrapper's max_episode_steps


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
    action = jnp.asarray(action, jnp.float32).reshape(-1)
    position, velocity = state.position, state.velocity
    force = jnp.clip(action[0], MIN_ACTION, MAX_ACTION)
    velocity = velocity + force * POWER - 0.0025 * jnp.cos(3 * position)
    velocity = jnp.clip(velocity, -MAX_SPEED, MAX_SPEED)
    position = position + velocity
    position = jnp.clip(position, MIN_POSITION, MAX_POSITION)
    # the left wall is inelastic: the reference zeroes a leftward velocity there
    velocity = jnp.where((position == MIN_POSITION) & (velocity < 0), 0.0, velocity)
    terminated = (position >= GOAL_POSITION) & (velocity >= GOAL_VELOCITY)
    # the penalty uses the raw action, not the clipped force
    reward = jnp.where(terminated, 100.0, 0.0) - action[0] ** 2 * 0.1
    time = state.time + 1
    new_state = EnvState(position.astype(jnp.float32), velocity.astype(jnp.float32), time)
    truncated = time >= MAX_EPISODE_STEPS
    return new_state, observe(new_state), reward.astype(jnp.float32), terminated, truncated


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
