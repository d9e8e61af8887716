"""Steps per second of a port, timed by the host around calls into the port's sandboxed driver.

The port is opened in the sandbox the user chose (``sandbox.driver.open_sandboxed``: the same
door as verification), and the host times one driver call that resets ``batch`` envs and runs
``steps`` batched steps with random actions inside the sandbox (``Driver.run_steps``: a jitted
``lax.scan`` for a JAX port). The first call compiles; the fastest of the next three counts.
Nothing the port prints or returns is read as a number: only the host's own clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from envforge.backends.base import Driver
from envforge.backends.recipe import port_recipe
from envforge.errors import DriverFailure, EnvforgeError
from envforge.sandbox.driver import open_sandboxed
from envforge.sandbox.select import open_sandbox
from envforge.spec import EnvSpec

MEASURE_TIMEOUT_S = 600.0
"""Limit on each timed call (and on the port's import)."""
TIMED_CALLS = 3
"""Timed calls after the compiling one; the fastest counts."""


@dataclass(frozen=True)
class Throughput:
    steps_per_second: float
    batch: int
    steps: int
    device: str
    compile_s: float


def measure_sandboxed(
    spec: EnvSpec,
    port_dir: Path,
    batch: int = 4096,
    steps: int = 200,
    sandbox_kind: str | None = None,
) -> Throughput | str:
    """The port's steps/s in the sandbox of kind ``sandbox_kind`` (docker, process; "none" or
    None: the plain isolated child of ``--sandbox none``), timed by the host; or why it failed
    (one line)."""
    sandbox = open_sandbox(sandbox_kind)
    where = f"{sandbox.kind} sandbox" if sandbox is not None else "no sandbox"
    try:
        driver = open_sandboxed(port_recipe(spec, port_dir), sandbox, timeout_s=MEASURE_TIMEOUT_S)
    except EnvforgeError as e:
        return f"throughput measurement failed: {one_line(e)}"
    return time_driver(driver, batch, steps, where)


def time_driver(
    driver: Driver, batch: int, steps: int, where: str, repeats: int = TIMED_CALLS
) -> Throughput | str:
    """Time ``driver.run_steps`` on the host (the first call compiles; the fastest of the
    next ``repeats`` counts: a busy neighbour only slows a call down), then close the
    driver; or why it failed (one line)."""
    try:
        started = time.perf_counter()
        driver.run_steps(batch, steps, 0)
        compile_s = time.perf_counter() - started
        elapsed = float("inf")
        for seed in range(1, repeats + 1):
            started = time.perf_counter()
            driver.run_steps(batch, steps, seed)
            elapsed = min(elapsed, time.perf_counter() - started)
    except EnvforgeError as e:
        return f"throughput measurement failed: {one_line(e)}"
    finally:
        driver.close()
    return Throughput(batch * steps / max(elapsed, 1e-9), batch, steps, where, compile_s)


def one_line(e: EnvforgeError) -> str:
    text = e.message if isinstance(e, DriverFailure) else str(e)
    return (text.splitlines() or [""])[0][:300]
