"""Rust ports stepped from Python the way a training loop would: one ``EnvBatch.step`` per batch.

The port is built (or taken from the build cache) by the Rust backend; build time is reported as
its compile time and excluded. Each call steps the whole batch (rayon across envs, GIL released)
and writes observations, rewards and flags into preallocated numpy buffers. Random actions
cycle through 16 pre-drawn arrays; the MLP policy runs in numpy on the observations each step.

``EnvBatch`` resets only a whole batch, so envs whose episode ended keep stepping (the same work
per step; pong games outlast a benchmark run anyway). Every row carries that note.
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

NOTE = "no auto-reset: EnvBatch resets whole batches only, ended envs keep stepping"


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
            tick = [0]

            def act(
                obs: np.ndarray = obs, drawn: list = drawn, tick: list = tick, policy: str = policy
            ) -> np.ndarray:
                if policy == "mlp":
                    return mlp_actions(spec, params, obs)
                tick[0] += 1
                return drawn[tick[0] % 16]

            def call(
                batch: object = batch,
                act: object = act,
                buffers: tuple = (obs, reward, terminated, truncated),
            ) -> None:
                batch.step(act(), *buffers)  # type: ignore[attr-defined, operator]

            wall, cpu = timed_runs(call, n, settings.repeats, settings.min_run_s)
            out.append(Measurement(label, "port", policy, n, wall, cpu, build_s, note=NOTE))
    driver.close()
    return out
