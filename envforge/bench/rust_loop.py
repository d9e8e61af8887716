"""Rust ports stepped from Python the way a training loop would: one ``EnvBatch.step`` per batch.

The port is built (or taken from the build cache) by the Rust backend; build time is reported as
its compile time and excluded. Each call steps the whole batch (rayon across envs, GIL released)
and writes observations, rewards and flags into preallocated numpy buffers; then the envs whose
episode ended are reset from fresh seeds with ``EnvBatch.reset_where`` (the auto-reset of the
other loops). Random actions and reset seeds cycle through 16 pre-drawn arrays; the MLP policy
runs in numpy on the observations each step.

``reset_where`` is optional in the port contract: a port without it resets only whole batches,
so its ended envs keep stepping, and its rows say so.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from envforge.bench.jax_loop import mlp_params
from envforge.bench.measure import BenchSettings, Measurement, timed_runs
from envforge.bench.python_loop import mlp_actions
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
    out = []
    for policy in settings.policies:
        for n in settings.batch_sizes:
            batch = batch_class(n, settings.strict_float)
            batch.reset(np.arange(n, dtype=np.uint32))
            obs = np.zeros((n, *spec.observation.shape), np.float32)
            batch.observe(obs)
            reward = np.zeros(n, np.float32)
            terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
            drawn = [random_actions(spec, rng, n) for _ in range(16)]
            fresh = [rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(16)]
            auto_reset = hasattr(batch, "reset_where")
            tick, resets = [0], [0]

            def act(
                obs: np.ndarray = obs, drawn: list = drawn, tick: list = tick, policy: str = policy
            ) -> np.ndarray:
                if policy == "mlp":
                    return mlp_actions(spec, params, obs)
                tick[0] += 1
                return drawn[tick[0] % 16]

            done = np.zeros(n, bool)

            def call(
                batch: object = batch,
                act: object = act,
                buffers: tuple = (obs, reward, terminated, truncated),
                done: np.ndarray = done,
                fresh: list = fresh,
                resets: list = resets,
                auto_reset: bool = auto_reset,
            ) -> None:
                batch.step(act(), *buffers)  # type: ignore[attr-defined, operator]
                if auto_reset:
                    np.logical_or(buffers[2], buffers[3], out=done)
                    resets[0] += 1
                    batch.reset_where(done, fresh[resets[0] % 16])  # type: ignore[attr-defined]

            wall, cpu = timed_runs(call, n, settings.repeats, settings.min_run_s)
            note = "" if auto_reset else NOTE
            out.append(Measurement(label, "port", policy, n, wall, cpu, build_s, note=note))
    driver.close()
    return out
