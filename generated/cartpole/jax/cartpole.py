"""CartPole-v1 in JAX, ported by hand from gymnasium 1.4.0 ``envs/classic_control/cartpole.py``.

Explicit Euler integration (the reference's default ``kinematics_integrator``), reward 1 on
every step including the terminal one, and truncation after 500 steps computed from ``time``
exactly as gymnasium's TimeLimit wrapper does (``elapsed >= max_episode_steps``). The
reference computes in float64; this port is float32.

What XLA:CPU needs to run it fast is in ``envforge/kit/speed_layer.py``, called on the lines marked
``speed layer:``; ``ENVFORGE_SPEED_LAYER=off`` switches it off (sin and cos then come from
``jnp.sin``/``jnp.cos``, about one float32 ulp apart, well inside the spec's tolerance).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envforge.kit import speed_layer

f32 = np.float32

# the reference's constants, by its names (CartPoleEnv.__init__), in the port's float32
GRAVITY = f32(9.8)
MASSCART = f32(1.0)
MASSPOLE = f32(0.1)
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = f32(0.5)  # half the pole's length, as in the reference
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = f32(10.0)
TAU = f32(0.02)  # seconds between state updates
THETA_THRESHOLD_RADIANS = f32(12 * 2 * math.pi / 360)
X_THRESHOLD = f32(2.4)
MAX_EPISODE_STEPS = 500  # the TimeLimit wrapper's max_episode_steps


class EnvState(NamedTuple):
    x: jax.Array
    x_dot: jax.Array
    theta: jax.Array
    theta_dot: jax.Array
    time: jax.Array  # steps since reset: the TimeLimit wrapper's counter


# ---- physics ---------------------------------------------------------------------------------


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG)
    sintheta, costheta = speed_layer.sincos(state.theta)  # speed layer: jnp.sin/cos when off
    temp = (force + POLEMASS_LENGTH * state.theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS

    x = state.x + TAU * state.x_dot
    x_dot = state.x_dot + TAU * xacc
    theta = state.theta + TAU * state.theta_dot
    theta_dot = state.theta_dot + TAU * thetaacc
    time = state.time + 1
    new_state = EnvState(x, x_dot, theta, theta_dot, time)

    terminated = (
        (x < -X_THRESHOLD)
        | (x > X_THRESHOLD)
        | (theta < -THETA_THRESHOLD_RADIANS)
        | (theta > THETA_THRESHOLD_RADIANS)
    )
    truncated = time >= MAX_EPISODE_STEPS
    # speed layer: an auto-reset loop would redo these in each state field's fusion
    terminated, truncated = speed_layer.settle_flags(terminated, truncated)
    reward = jnp.float32(1.0)
    return new_state, observe(new_state), reward, terminated, truncated


def observe(state: EnvState) -> jax.Array:
    return jnp.stack([state.x, state.x_dot, state.theta, state.theta_dot]).astype(jnp.float32)


# ---- reset: four uniforms from a hash of the seed --------------------------------------------


def reset(seed: jax.Array) -> EnvState:
    seed = jnp.asarray(seed).astype(jnp.uint32)
    x, x_dot, theta, theta_dot = (uniform_from_seed(seed, lane, -0.05, 0.05) for lane in range(4))
    return EnvState(x, x_dot, theta, theta_dot, jnp.int32(0))


def mix32(x: jax.Array) -> jax.Array:
    """A 32-bit integer finalizer ("lowbias32", C. Wellons): every input bit flips every
    output bit with probability close to 1/2."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def uniform_from_seed(seed: jax.Array, lane: int, low: float, high: float) -> jax.Array:
    """Counter-based draw ``lane`` of ``seed``, uniform on [low, high) in float32.

    A hash of (seed, lane) instead of ``jax.random``: the auto-reset of a batched rollout
    computes a fresh reset for every env on every step, and threefry's ~100 integer operations
    per draw (recomputed by XLA for each of the four fields) cost more than the physics. The
    reference's reset is only matched in distribution (uniform per field), so any well-mixed
    hash of the seed serves."""
    bits = mix32(mix32(seed) + jnp.uint32(0x9E3779B9) * jnp.uint32(lane + 1))
    u = (bits >> 8).astype(jnp.float32) * jnp.float32(1.0 / 16777216.0)
    return jnp.float32(low) + u * jnp.float32(high - low)


# ---- canonical state -------------------------------------------------------------------------


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(
        x=jnp.asarray(fields["x"], jnp.float32),
        x_dot=jnp.asarray(fields["x_dot"], jnp.float32),
        theta=jnp.asarray(fields["theta"], jnp.float32),
        theta_dot=jnp.asarray(fields["theta_dot"], jnp.float32),
        time=jnp.asarray(fields["time"], jnp.int32),
    )
