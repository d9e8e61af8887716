"""Timing: one measurement is the median steps/s of several runs, each long enough to trust."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

BATCH_SIZES = (1, 64, 1024, 4096, 16384, 65536)


@dataclass(frozen=True)
class BenchSettings:
    """How hard to measure. Defaults suit a quiet machine; tests pass smaller values."""

    batch_sizes: tuple[int, ...] = BATCH_SIZES
    repeats: int = 5
    """Timed runs per measurement; the median is reported."""
    min_run_s: float = 0.2
    """Each timed run repeats calls until it lasts at least this long."""
    policies: tuple[str, ...] = ("random", "mlp")
    strict_float: bool = False
    """Measure the strict builds (C -ffp-contract=off, XLA without FMA) instead of fast ones."""
    max_python_batch: int = 4096
    """Python references (gymnasium) above this batch are not run: one object per env, and
    their per-env cost is flat beyond a few envs."""
    hidden: int = 64
    """Width of the MLP policy's one hidden layer."""
    reset_modes: tuple[str, ...] = ("fresh", "first")
    """JAX auto-reset variants measured: fresh (gymnax) and first-state (Brax)."""
    steps_per_call: int | None = None
    """Env steps per jitted JAX call (batch x scan length, at least one scan step and at most
    2048); None: 65536 with at least 16 scan steps. Smaller makes a slow port's large batches
    affordable (MJX on a CPU: 65536 steps are minutes a call)."""
    speed_layers: tuple[str, ...] = ("on",)
    """JAX ports: ``envforge.kit.speed_layer`` positions measured, ``on``, ``off`` or both (each
    ``off`` row is labelled ``speed layer off``)."""


@dataclass
class Measurement:
    implementation: str
    """Row label, e.g. ``C loop (reference)`` or ``jax port``."""
    role: str
    """reference | port"""
    policy: str
    batch: int
    runs_sps: list[float] = field(default_factory=list)
    runs_cpu_sps: list[float] = field(default_factory=list)
    """Env steps per second of process CPU time (all threads): per-core efficiency, which a
    busy machine disturbs far less than wall-clock throughput."""
    compile_s: float | None = None
    """Trace + compile time (JAX) or build time (C), excluded from ``runs_sps``."""
    note: str = ""
    measured: dict[str, Any] | None = None
    """Where and when this row was measured, when that differs from its report's run (a row
    merged in by ``benchmarks/regenerate_docs.py --targets/--port``): date, cpu, cores,
    load_before, command. None: the report's own date, machine and command."""

    @property
    def sps(self) -> float | None:
        return statistics.median(self.runs_sps) if self.runs_sps else None

    @property
    def cpu_sps(self) -> float | None:
        return statistics.median(self.runs_cpu_sps) if self.runs_cpu_sps else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "implementation": self.implementation,
            "role": self.role,
            "policy": self.policy,
            "batch": self.batch,
            "sps": self.sps,
            "runs_sps": self.runs_sps,
            "cpu_sps": self.cpu_sps,
            "runs_cpu_sps": self.runs_cpu_sps,
            "compile_s": self.compile_s,
            "note": self.note,
        }
        if self.measured is not None:
            out["measured"] = self.measured
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        return cls(
            implementation=data["implementation"],
            role=data["role"],
            policy=data["policy"],
            batch=int(data["batch"]),
            runs_sps=[float(x) for x in data.get("runs_sps", [])],
            runs_cpu_sps=[float(x) for x in data.get("runs_cpu_sps", [])],
            compile_s=data.get("compile_s"),
            note=data.get("note", ""),
            measured=data.get("measured"),
        )


RunFn = Callable[[], tuple[int, float, float]]
"""One timed run: (env steps, wall seconds, process CPU seconds)."""


class RunFailed(Exception):
    """A run could not be made (a harness exited with an error): the message becomes the
    measurement's note and the job is not run again."""


def calls_run(call: Callable[[], object], env_steps_per_call: int, min_run_s: float) -> RunFn:
    """A run of ``k`` back-to-back calls, ``k`` set by one untimed first call so that a run
    lasts ``min_run_s``. ``call`` must block until its work is done (JAX callers block on the
    result)."""
    calls: list[int] = []

    def run() -> tuple[int, float, float]:
        if not calls:
            start = time.perf_counter()
            call()
            calls.append(max(1, math.ceil(min_run_s / max(time.perf_counter() - start, 1e-7))))
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(calls[0]):
            call()
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        return calls[0] * env_steps_per_call, wall, cpu

    return run


def interleaved(jobs: Sequence[tuple[Measurement, RunFn]], repeats: int) -> list[Measurement]:
    """Fill each measurement with ``repeats`` runs, taken in rounds (one run of every job, then
    the next round), so that a burst of load from other work on a shared machine spoils one
    run of several jobs, which their medians discard, rather than every run of one job."""
    live = list(jobs)
    for _ in range(repeats):
        for job in list(live):
            m, run = job
            try:
                steps, wall, cpu = run()
            except RunFailed as e:
                m.note = str(e)
                live.remove(job)
                continue
            m.runs_sps.append(steps / max(wall, 1e-12))
            m.runs_cpu_sps.append(steps / max(cpu, 1e-9))
    return [m for m, _ in jobs]


def timed_runs(
    call: Callable[[], object], env_steps_per_call: int, repeats: int, min_run_s: float
) -> tuple[list[float], list[float]]:
    """(steps per wall second, steps per CPU second) of ``repeats`` runs of one job."""
    m = Measurement("", "", "", 0)
    interleaved([(m, calls_run(call, env_steps_per_call, min_run_s))], repeats)
    return m.runs_sps, m.runs_cpu_sps
