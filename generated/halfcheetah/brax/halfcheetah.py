"""Brax's HalfCheetah (``brax.envs.half_cheetah``, brax 0.14.2, MJX backend) seen through
envforge's JAX port contract, to verify a third-party physics port against gymnasium's
``HalfCheetah-v5``. Nothing here changes Brax's physics, reward or observation: this module
only maps its state onto the spec's canonical fields (``q`` -> qpos, ``qd`` -> qvel, the MJX
data's ``qacc_warmstart``) and adds the TimeLimit counter Brax keeps outside its env.

Verification only (``pip install brax``; not a dependency of envforge). Like the MJX port it
turns on ``jax_enable_x64`` when imported, so both sides compute in float64.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from brax.envs import half_cheetah  # noqa: E402

from envforge.kit import use_xla_linalg_on_cpu  # noqa: E402

# as in the MJX port: XLA's own Cholesky on CPU, not jaxlib's LAPACK kernels, whose batch
# split can deadlock XLA's thread pool on 2 cores (envforge/kit/xla_cpu.py); before any tracing
use_xla_linalg_on_cpu()

ENV = half_cheetah.Halfcheetah(backend="mjx")
MAX_EPISODE_STEPS = 1000


class EnvState(NamedTuple):
    pipeline: Any  # Brax's pipeline state (MJX data)
    time: jax.Array


def _wrap(pipeline: Any, time: Any) -> EnvState:
    return EnvState(pipeline=pipeline, time=jnp.asarray(time, jnp.int32))


def reset(seed: Any) -> EnvState:
    state = ENV.reset(jax.random.PRNGKey(seed))
    return _wrap(state.pipeline_state, 0)


def observe(state: EnvState) -> jax.Array:
    return ENV._get_obs(state.pipeline)


def step(state: EnvState, action: jax.Array) -> tuple[EnvState, jax.Array, Any, Any, Any]:
    zero = jnp.zeros(())
    metrics = {"x_position": zero, "x_velocity": zero, "reward_ctrl": zero, "reward_run": zero}
    brax_state = half_cheetah.State(state.pipeline, observe(state), zero, zero, metrics)
    out = ENV.step(brax_state, jnp.asarray(action, jnp.float64))
    time = state.time + 1
    new = _wrap(out.pipeline_state, time)
    return new, out.obs, out.reward, jnp.bool_(False), time >= MAX_EPISODE_STEPS


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {
        "qpos": state.pipeline.q,
        "qvel": state.pipeline.qd,
        "qacc_warmstart": state.pipeline.qacc_warmstart,
        "time": state.time,
    }


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    pipeline = ENV.pipeline_init(
        jnp.asarray(fields["qpos"], jnp.float64), jnp.asarray(fields["qvel"], jnp.float64)
    )
    pipeline = pipeline.replace(qacc_warmstart=jnp.asarray(fields["qacc_warmstart"], jnp.float64))
    return _wrap(pipeline, fields["time"])
