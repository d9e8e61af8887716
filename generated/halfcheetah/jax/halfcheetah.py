"""HalfCheetah-v5 (gymnasium 1.4.0, envs/mujoco/half_cheetah_v5.py) ported to JAX on MJX.

The physics is MuJoCo's own, run by MJX (``mujoco-mjx``, the JAX reimplementation of MuJoCo
shipped at the same version as ``mujoco``) on the model file gymnasium ships
(``half_cheetah.xml``): 5 Euler steps of 0.01 s per env step. What this module adds is what
gymnasium's env adds around ``mj_step``: the reward (forward velocity minus control cost), the
observation (positions without the x coordinate, then velocities), the reset noise and the
TimeLimit counter.

Precision: importing this module turns on ``jax_enable_x64`` (process-wide), so MJX computes in
float64 like the reference; set ``ENVFORGE_HALFCHEETAH_FLOAT32=1`` before importing it for
MJX's usual float32. In float64 one step agrees with the reference to about 1e-11; in float32
to about 1e-4, and beyond the spec's 1e-3 from a few drawn states (PROVENANCE.md has the
measurements).

The canonical state is ``qpos`` (9), ``qvel`` (9), the constraint solver's warm start
``qacc_warmstart`` (9: MuJoCo starts each step's search from the previous accelerations, which
moves the result within the solver's tolerance) and the TimeLimit counter ``time``. A step
starts from fresh MJX data holding those.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium
import jax

if os.environ.get("ENVFORGE_HALFCHEETAH_FLOAT32", "") in ("", "0"):
    jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402

# MJX prints "Failed to import warp" to stdout on import: to stderr, so stdout stays the
# caller's (`envforge bench --json` prints its report there)
with contextlib.redirect_stdout(sys.stderr):
    from mujoco import mjx

from envforge.kit import cache_root, use_xla_linalg_on_cpu  # noqa: E402

# MJX factors its mass matrix and solver Hessian with jax's batched LAPACK kernels, which on a
# 2-core CPU can deadlock XLA's thread pool (envforge/kit/xla_cpu.py says how): use XLA's own
# Cholesky and triangular solve instead (same results to rounding). Before anything is traced.
use_xla_linalg_on_cpu()

# MJX's step takes 20-60 s to compile per batch shape on a 2-core CPU: keep the executables
# between processes (the verifier's child processes, tests, benchmarks), unless the caller
# configured a cache of its own (not mutated: where executables are cached cannot change them)
if not jax.config.jax_compilation_cache_dir:  # envforge: no-mutate
    jax.config.update("jax_compilation_cache_dir", str(cache_root() / "jax"))  # envforge: no-mutate
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.0)  # envforge: no-mutate

MODEL_FILE = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "half_cheetah.xml"
FRAME_SKIP = 5
FORWARD_REWARD_WEIGHT = 1.0
CTRL_COST_WEIGHT = 0.1
RESET_NOISE_SCALE = 0.1
MAX_EPISODE_STEPS = 1000

MJ_MODEL = mujoco.MjModel.from_xml_path(str(MODEL_FILE))
MODEL = mjx.put_model(MJ_MODEL)
DT = float(MJ_MODEL.opt.timestep) * FRAME_SKIP  # 0.05 s per env step
FLOAT = jnp.asarray(0.0).dtype  # float32, or float64 when jax_enable_x64 is on at import
INIT_QPOS = jnp.asarray(MJ_MODEL.qpos0, dtype=FLOAT)
INIT_QVEL = jnp.zeros(MJ_MODEL.nv, dtype=FLOAT)


class EnvState(NamedTuple):
    qpos: jax.Array  # float[9]
    qvel: jax.Array  # float[9]
    qacc_warmstart: jax.Array  # float[9]: the last MuJoCo step's accelerations
    time: jax.Array  # int32[]: steps since reset (TimeLimit's _elapsed_steps)


def reset(seed: Any) -> EnvState:
    """qpos = init + U(-0.1, 0.1), qvel = init + 0.1 * N(0, 1), as ``reset_model`` draws them."""
    key_pos, key_vel = jax.random.split(jax.random.PRNGKey(seed))
    qpos = INIT_QPOS + jax.random.uniform(
        key_pos, (MJ_MODEL.nq,), minval=-RESET_NOISE_SCALE, maxval=RESET_NOISE_SCALE
    )
    qvel = INIT_QVEL + RESET_NOISE_SCALE * jax.random.normal(key_vel, (MJ_MODEL.nv,))
    # reset's mj_forward leaves the warm start at mj_resetData's zeros
    return EnvState(qpos=qpos, qvel=qvel, qacc_warmstart=INIT_QVEL, time=jnp.int32(0))


def simulate(state: EnvState, ctrl: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``do_simulation``: hold ``ctrl`` for FRAME_SKIP MuJoCo steps (MuJoCo clamps it to the
    actuators' ctrlrange). Returns qpos, qvel and the warm start for the next step."""
    data = mjx.make_data(MODEL).replace(
        qpos=state.qpos, qvel=state.qvel, qacc_warmstart=state.qacc_warmstart, ctrl=ctrl
    )

    def one(d: Any, _: None) -> tuple[Any, None]:
        return mjx.step(MODEL, d), None

    data, _ = jax.lax.scan(one, data, None, length=FRAME_SKIP)
    return data.qpos, data.qvel, data.qacc_warmstart


def observe(state: EnvState) -> jax.Array:
    """Positions without rootx, then velocities (17)."""
    return jnp.concatenate([state.qpos[1:], state.qvel])


def step(state: EnvState, action: jax.Array) -> tuple[EnvState, jax.Array, Any, Any, Any]:
    action = jnp.asarray(action, dtype=jnp.float32)  # the reference's action space is float32
    qpos, qvel, warmstart = simulate(state, action)
    x_velocity = (qpos[0] - state.qpos[0]) / DT
    forward_reward = FORWARD_REWARD_WEIGHT * x_velocity
    ctrl_cost = CTRL_COST_WEIGHT * jnp.sum(jnp.square(action))  # of the unclipped action
    reward = forward_reward - ctrl_cost
    time = state.time + 1
    new_state = EnvState(qpos=qpos, qvel=qvel, qacc_warmstart=warmstart, time=time)
    terminated = jnp.bool_(False)  # HalfCheetah never terminates
    truncated = time >= MAX_EPISODE_STEPS
    return new_state, observe(new_state), reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {
        "qpos": state.qpos,
        "qvel": state.qvel,
        "qacc_warmstart": state.qacc_warmstart,
        "time": state.time,
    }


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(
        qpos=jnp.asarray(fields["qpos"], dtype=FLOAT),
        qvel=jnp.asarray(fields["qvel"], dtype=FLOAT),
        qacc_warmstart=jnp.asarray(fields["qacc_warmstart"], dtype=FLOAT),
        time=jnp.asarray(fields["time"], dtype=jnp.int32),
    )
