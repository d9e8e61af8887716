"""Rust ports stepped from Python the way a training loop would: one ``EnvBatch.step`` per batch.

The port is built (or taken from the build cache) by the Rust backend; build time is reported as
its compile time and excluded. Each call steps the whole batch (rayon across envs, GIL released)
and writes observations, rewards and flags into preallocated numpy buffers; then the envs whose
episode ended are reset from fresh seeds with ``EnvBatch.reset_where`` (the auto-reset of the
other loops) and, after a step in which any was, the batch is observed again so the reset rows'
observations are their new episodes' (as ``envforge.make``'s VectorEnv does; before 2026-12-03
the loop skipped that observe, so the reset rows kept stale observations and the port did less
work than node's loop, which observes every env after its step or reset). Random actions and reset seeds cycle through 16 pre-drawn arrays; the MLP policy
is the JAX loop's, jitted, called on the observations each step, as a training loop with a JAX
learner would act (numpy's ``tanh`` alone had held these rows to a few M steps/s).

``reset_where`` is optional in the port contract: a port without it resets only whole batches,
so its ended envs keep stepping, and its rows say so.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from envforge.bench.jax_loop import mlp_params, mlp_policy
from envforge.bench.measure import BenchSettings, Measurement, calls_run, interleaved
from envforge.spec import EnvSpec
from envforge.verify.policies import random_actions

NOTE = "no auto-reset: this EnvBatch has no reset_where, ended envs keep stepping"


def measure_rust(
    spec: EnvSpec, crate: Path, settings: BenchSettings, label: str = "rust port"
) -> list[Measurement]:
    from envforge.backends.rust import BATCH_CLASS, RustDriver

    start = time.perf_counter()
    driver = RustDriver(spec, crate, strict_float=settings.strict_float)
    build_s = time.perf_counter() - start
    batch_class = getattr(driver.module, BATCH_CLASS)
    params = mlp_params(spec, settings.hidden)
    rng = np.random.default_rng(0)
    jobs = []
    for policy in settings.policies:
        for n in settings.batch_sizes:
            batch = batch_class(n, settings.strict_float)
            batch.reset(np.arange(n, dtype=np.uint32))
            call = stepper(spec, batch, n, policy, params, rng)
            note = "" if hasattr(batch, "reset_where") else NOTE
            m = Measurement(label, "port", policy, n, compile_s=build_s, note=note)
            jobs.append((m, calls_run(call, n, settings.min_run_s)))
    out = interleaved(jobs, settings.repeats)
    driver.close()
    return out


def stepper(
    spec: EnvSpec,
    batch: Any,
    n: int,
    policy: str,
    params: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> Callable[[], None]:
    """One training-loop step of ``batch``: act, step into preallocated buffers, reset the envs
    whose episode ended (when the port has ``reset_where``) and then observe the batch, so the
    next action sees the reset rows' new observations."""
    obs = np.zeros((n, *spec.observation.shape), np.float32)
    batch.observe(obs)
    reward = np.zeros(n, np.float32)
    terminated, truncated, done = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    drawn = [random_actions(spec, rng, n) for _ in range(16)]
    fresh = [rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(16)]
    auto_reset = hasattr(batch, "reset_where")
    ticks = itertools.count(1)
    act = jitted_policy(spec, params) if policy == "mlp" else None

    def call() -> None:
        k = next(ticks) % 16
        actions = act(obs) if act is not None else drawn[k]
        batch.step(actions, obs, reward, terminated, truncated)
        if auto_reset:
            np.logical_or(terminated, truncated, out=done)
            if done.any():
                batch.reset_where(done, fresh[k])
                batch.observe(obs)

    return call


def jitted_policy(
    spec: EnvSpec, params: dict[str, np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    """The bench's MLP as one jitted XLA call from numpy observations to numpy actions."""
    import jax

    weights = jax.tree_util.tree_map(jax.numpy.asarray, params)
    policy = jax.jit(mlp_policy(spec))

    def act(obs: np.ndarray) -> np.ndarray:
        return np.asarray(policy(weights, obs))

    return act
