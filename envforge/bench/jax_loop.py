"""JAX ports stepped in-process: one jitted ``lax.scan`` over steps of the vmapped step.

Inside the scan each env draws its action from its own xorshift32 state (as the C harness
does) or from a small MLP on its observation, steps, and is reset where its episode ended
(``where(done, reset, next)``, the gymnax way; or, as a second variant, returned to its
own first state, the Brax way, which skips the reset's work). The final carry (states, observations,
summed rewards) is returned so XLA cannot drop any of that work. Trace and compile time is
measured on its own and excluded from the timed runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from envforge.backends.jax import find_port_module, load_module
from envforge.bench.measure import (
    BenchSettings,
    Measurement,
    RunFn,
    calls_run,
    interleaved,
)
from envforge.kit import speed_layer
from envforge.spec import EnvSpec

STEPS_PER_CALL = 1 << 16
"""Env steps per jitted call (batch x scan length), at least 16 and at most 2048 scan steps."""


def scan_length(batch: int, steps_per_call: int | None = None) -> int:
    """Scan steps of one call at ``batch``: ``STEPS_PER_CALL`` env steps and at least 16 scan
    steps by default, else ``steps_per_call`` env steps and at least one."""
    if steps_per_call is None:
        return int(min(2048, max(16, STEPS_PER_CALL // batch)))
    return int(min(2048, max(1, steps_per_call // batch)))


def load_port(spec: EnvSpec, port: Path) -> ModuleType:
    return load_module(find_port_module(port, spec.name))


def mlp_params(spec: EnvSpec, hidden: int) -> dict[str, np.ndarray]:
    obs_dim = int(np.prod(spec.observation.shape))
    n_out = spec.action.n if spec.action.type == "discrete" else int(np.prod(spec.action.shape))
    assert n_out is not None
    rng = np.random.default_rng(12345)
    return {
        "w1": (rng.uniform(-0.5, 0.5, (obs_dim, hidden)) / np.sqrt(obs_dim)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.uniform(-0.5, 0.5, (hidden, n_out)) / np.sqrt(hidden)).astype(np.float32),
        "b2": np.zeros(n_out, np.float32),
    }


def mlp_policy(spec: EnvSpec) -> Callable[[Any, Any], Any]:
    """``policy(params, obs) -> actions`` of the bench's MLP in JAX (not jitted): argmax for
    discrete actions (int32), tanh squashed into the action bounds for continuous ones."""
    import jax.numpy as jnp

    discrete = spec.action.type == "discrete"
    low, high = (
        (jnp.asarray(b.reshape(-1)) for b in spec.action.bounds()) if not discrete else (0, 0)
    )
    action_shape = spec.action.shape

    def policy(params: Any, obs: Any) -> Any:
        flat = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        hidden = jnp.tanh(flat @ params["w1"] + params["b1"])
        out = hidden @ params["w2"] + params["b2"]
        if discrete:
            return jnp.argmax(out, axis=-1).astype(jnp.int32)
        u = 0.5 * (jnp.tanh(out) + 1.0)
        action = (low + u * (high - low)).astype(jnp.float32)
        return action.reshape((action.shape[0], *action_shape))

    return policy


def make_rollout(
    module: ModuleType, spec: EnvSpec, policy: str, length: int, resets: str = "fresh"
) -> Callable[[Any, Any], Any]:
    """``rollout(carry, params) -> carry`` running ``length`` batched steps (not yet jitted).

    ``resets``: ``fresh`` computes a new reset for every env on every step and keeps it where
    the episode ended (gymnax's auto-reset); ``first`` returns an ended env to its own first
    state, ``params["first"]`` (Brax's AutoResetWrapper), which skips the reset's work."""
    import jax
    import jax.numpy as jnp

    step = jax.vmap(module.step)
    reset = jax.vmap(module.reset)
    observe = jax.vmap(module.observe)
    discrete = spec.action.type == "discrete"
    low, high = (
        (jnp.asarray(b.reshape(-1)) for b in spec.action.bounds()) if not discrete else (0, 0)
    )
    action_shape = spec.action.shape

    def xorshift(x: jax.Array) -> jax.Array:
        x = x ^ (x << 13)
        x = x ^ (x >> 17)
        return x ^ (x << 5)

    mlp = mlp_policy(spec)

    def act(obs: jax.Array, rng: jax.Array, params: Any) -> tuple[jax.Array, jax.Array]:
        if policy == "mlp":
            return mlp(params, obs), rng
        rng = xorshift(rng)
        if discrete:
            return (rng % jnp.uint32(spec.action.n)).astype(jnp.int32), rng
        u = (rng >> 8).astype(jnp.float32)[:, None] * (1.0 / 16777216.0)
        action = (low + u * (high - low)).astype(jnp.float32)
        return action.reshape((action.shape[0], *action_shape)), rng

    def body(carry: tuple, _: None) -> tuple[tuple, None]:
        state, obs, rng, total, params = carry
        action, rng = act(obs, rng, params)
        after, _, reward, terminated, truncated = step(state, action)
        done = terminated | truncated
        rng = xorshift(rng)
        fresh = reset(rng) if resets == "fresh" else params["first"]

        def pick(f: jax.Array, a: jax.Array) -> jax.Array:
            return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), f, a)

        state = jax.tree_util.tree_map(pick, fresh, after)
        # the running total keeps its float32 (a port computing in float64 returns float64)
        total = total + reward.astype(total.dtype)
        return (state, observe(state), rng, total, params), None

    def rollout(carry: tuple, params: Any) -> tuple:
        state, obs, rng, total = carry
        out, _ = jax.lax.scan(body, (state, obs, rng, total, params), None, length=length)
        return out[:4]

    return rollout


def initial_carry(module: ModuleType, batch: int) -> tuple:
    import jax
    import jax.numpy as jnp

    seeds = jnp.arange(batch, dtype=jnp.uint32)
    state = jax.vmap(module.reset)(seeds)
    obs = jax.vmap(module.observe)(state)
    rng = (seeds * jnp.uint32(2654435761)) ^ jnp.uint32(0x9E3779B9)
    rng = jnp.where(rng == 0, jnp.uint32(1), rng)
    return state, obs, rng, jnp.zeros(batch, jnp.float32)


def measure_jax(
    spec: EnvSpec, port: Path, settings: BenchSettings, label: str = "jax port"
) -> list[Measurement]:
    import jax

    module = load_port(spec, port)
    weights = jax.tree_util.tree_map(jax.numpy.asarray, mlp_params(spec, settings.hidden))
    jobs = []
    for layer in settings.speed_layers:
        for resets in settings.reset_modes:
            name = label + (", speed layer off" if layer == "off" else "")
            name += ", first-state resets" if resets == "first" else ""
            for policy in settings.policies:
                for batch in settings.batch_sizes:
                    with speed_layer.switched(layer == "on"):  # read while tracing
                        row = Measurement(name, "port", policy, batch)
                        jobs.append(_compiled_job(module, spec, settings, weights, row, resets))
    return interleaved(jobs, settings.repeats)


def _compiled_job(
    module: ModuleType,
    spec: EnvSpec,
    settings: BenchSettings,
    weights: Any,
    row: Measurement,
    resets: str,
) -> tuple[Measurement, RunFn]:
    """The configuration of ``row`` traced and compiled (its compile time kept on ``row``), and
    its timed run."""
    import jax

    batch, policy = row.batch, row.policy
    length = scan_length(batch, settings.steps_per_call)
    carry = initial_carry(module, batch)
    params = {**weights, "first": carry[0]}
    start = time.perf_counter()
    rollout = make_rollout(module, spec, policy, length, resets)
    compiled = jax.jit(rollout).lower(carry, params).compile()
    compile_s = time.perf_counter() - start
    box = [carry]

    def call() -> None:
        box[0] = compiled(box[0], params)
        jax.block_until_ready(box[0])

    row.compile_s = compile_s
    return row, calls_run(call, batch * length, settings.min_run_s)
