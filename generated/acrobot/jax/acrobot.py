"""Acrobot-v1 in JAX, ported by hand from gymnasium 1.4.0 ``envs/classic_control/acrobot.py``.

The "book" dynamics (``book_or_nips = "book"``), integrated with one classic RK4 step of
``dt = 0.2`` over the state augmented with the torque, then both angles wrapped into
[-pi, pi] and the velocities clipped, as in the reference. No torque noise
(``torque_noise_max = 0``). Truncation after 500 steps is computed from ``time`` exactly as
gymnasium's TimeLimit wrapper does. The reference computes in float64; this port is float32.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

# the reference's constants, by its names (AcrobotEnv's class attributes)
DT = 0.2
LINK_LENGTH_1 = 1.0
LINK_MASS_1 = 1.0
LINK_MASS_2 = 1.0
LINK_COM_POS_1 = 0.5
LINK_COM_POS_2 = 0.5
LINK_MOI = 1.0
MAX_VEL_1 = 4 * math.pi
MAX_VEL_2 = 9 * math.pi
AVAIL_TORQUE = (-1.0, 0.0, 1.0)
G = 9.8
MAX_EPISODE_STEPS = 500  # the TimeLimit wrapper's max_episode_steps


class EnvState(NamedTuple):
    theta1: jax.Array
    theta2: jax.Array
    dtheta1: jax.Array
    dtheta2: jax.Array
    time: jax.Array  # steps since reset: the TimeLimit wrapper's counter


def reset(seed: jax.Array) -> EnvState:
    key = jax.random.PRNGKey(seed)
    theta1, theta2, dtheta1, dtheta2 = jax.random.uniform(key, (4,), jnp.float32, -0.1, 0.1)
    return EnvState(theta1, theta2, dtheta1, dtheta2, jnp.int32(0))


def _dsdt(s: jax.Array, a: jax.Array) -> jax.Array:
    """Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque ``a`` ("book")."""
    m1, m2 = LINK_MASS_1, LINK_MASS_2
    l1 = LINK_LENGTH_1
    lc1, lc2 = LINK_COM_POS_1, LINK_COM_POS_2
    I1 = I2 = LINK_MOI
    g = G
    theta1, theta2, dtheta1, dtheta2 = s[0], s[1], s[2], s[3]
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * jnp.cos(theta2)) + I1 + I2
    d2 = m2 * (lc2**2 + l1 * lc2 * jnp.cos(theta2)) + I2
    phi2 = m2 * lc2 * g * jnp.cos(theta1 + theta2 - jnp.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * jnp.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * jnp.sin(theta2)
        + (m1 * lc1 + m2 * l1) * g * jnp.cos(theta1 - jnp.pi / 2)
        + phi2
    )
    ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * jnp.sin(theta2) - phi2) / (
        m2 * lc2**2 + I2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return jnp.stack([dtheta1, dtheta2, ddtheta1, ddtheta2])


def _rk4(s: jax.Array, a: jax.Array) -> jax.Array:
    """One RK4 step over [0, dt], as the reference's ``rk4`` with ``t = [0, dt]``."""
    dt = DT
    dt2 = dt / 2.0
    k1 = _dsdt(s, a)
    k2 = _dsdt(s + dt2 * k1, a)
    k3 = _dsdt(s + dt2 * k2, a)
    k4 = _dsdt(s + dt * k3, a)
    return s + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def wrap(x: jax.Array, m: float, M: float) -> jax.Array:
    """The reference's ``while x > M: x -= diff; while x < m: x += diff`` in closed form."""
    diff = M - m
    x = jnp.where(x > M, x - diff * jnp.ceil((x - M) / diff), x)
    return jnp.where(x < m, x + diff * jnp.ceil((m - x) / diff), x)


def terminal(theta1: jax.Array, theta2: jax.Array) -> jax.Array:
    return -jnp.cos(theta1) - jnp.cos(theta2 + theta1) > 1.0


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    torque = jnp.asarray(AVAIL_TORQUE, jnp.float32)[action]
    s = jnp.stack([state.theta1, state.theta2, state.dtheta1, state.dtheta2])
    ns = _rk4(s, torque)
    theta1 = wrap(ns[0], -jnp.pi, jnp.pi)
    theta2 = wrap(ns[1], -jnp.pi, jnp.pi)
    dtheta1 = jnp.clip(ns[2], -MAX_VEL_1, MAX_VEL_1)
    dtheta2 = jnp.clip(ns[3], -MAX_VEL_2, MAX_VEL_2)
    time = state.time + 1
    new_state = EnvState(theta1, theta2, dtheta1, dtheta2, time)
    terminated = terminal(theta1, theta2)
    reward = jnp.where(terminated, 0.0, -1.0).astype(jnp.float32)
    truncated = time >= MAX_EPISODE_STEPS
    return new_state, observe(new_state), reward, terminated, truncated


def observe(state: EnvState) -> jax.Array:
    return jnp.stack(
        [
            jnp.cos(state.theta1),
            jnp.sin(state.theta1),
            jnp.cos(state.theta2),
            jnp.sin(state.theta2),
            state.dtheta1,
            state.dtheta2,
        ]
    ).astype(jnp.float32)


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(
        theta1=jnp.asarray(fields["theta1"], jnp.float32),
        theta2=jnp.asarray(fields["theta2"], jnp.float32),
        dtheta1=jnp.asarray(fields["dtheta1"], jnp.float32),
        dtheta2=jnp.asarray(fields["dtheta2"], jnp.float32),
        time=jnp.asarray(fields["time"], jnp.int32),
    )
