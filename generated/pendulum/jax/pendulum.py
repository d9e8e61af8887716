"""Pendulum-v1 in JAX, ported by hand from gymnasium 1.4.0 ``envs/classic_control/pendulum.py``.

Semi-implicit Euler: the new angular velocity (clipped to +-8) moves the angle. The angle in
the state is *not* wrapped; only the cost uses ``angle_normalize``. The torque is clipped to
+-2 before it enters both the dynamics and the cost. Pendulum never terminates; truncation
after 200 steps is computed from ``time`` exactly as gymnasium's TimeLimit wrapper does. The
reference computes in float64; this port is float32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# the reference's constants, by its names (PendulumEnv.__init__)
MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
G = 10.0
M = 1.0
L = 1.0  # the pendulum's length (the reference's l)
MAX_EPISODE_STEPS = 200  # the TimeLimit wrapper's max_episode_steps


class EnvState(NamedTuple):
    theta: jax.Array  # th in the reference; 0 is upright
    theta_dot: jax.Array  # thdot in the reference
    time: jax.Array  # steps since reset: the TimeLimit wrapper's counter


def angle_normalize(x: jax.Array) -> jax.Array:
    return ((x + jnp.pi) % (2 * jnp.pi)) - jnp.pi


def reset(seed: jax.Array) -> EnvState:
    key = jax.random.PRNGKey(seed)
    high = jnp.array([jnp.pi, 1.0], jnp.float32)
    theta, theta_dot = jax.random.uniform(key, (2,), jnp.float32, -high, high)
    return EnvState(theta, theta_dot, jnp.int32(0))


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    th, thdot = state.theta, state.theta_dot
    g, m, l, dt = G, M, L, DT  # noqa: E741
    u = jnp.clip(jnp.asarray(action, jnp.float32).reshape(-1)[0], -MAX_TORQUE, MAX_TORQUE)
    costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
    newthdot = thdot + (3 * g / (2 * l) * jnp.sin(th) + 3.0 / (m * l**2) * u) * dt
    newthdot = jnp.clip(newthdot, -MAX_SPEED, MAX_SPEED)
    newth = th + newthdot * dt
    time = state.time + 1
    new_state = EnvState(newth, newthdot, time)
    truncated = time >= MAX_EPISODE_STEPS
    return new_state, observe(new_state), -costs, jnp.bool_(False), truncated


def observe(state: EnvState) -> jax.Array:
    return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot]).astype(
        jnp.float32
    )


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(
        theta=jnp.asarray(fields["theta"], jnp.float32),
        theta_dot=jnp.asarray(fields["theta_dot"], jnp.float32),
        time=jnp.asarray(fields["time"], jnp.int32),
    )
