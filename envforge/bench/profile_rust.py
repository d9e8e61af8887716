"""``envforge profile <env> --target rust``: where a Rust port's batched step spends its time.

Computed as a job in the sandbox the user chose (``--sandbox``), like the JAX profile: the job
loads the port's extension (built or cached as the verifier builds it), steps a batch of ``B``
envs with bench's own loop (``rust_loop.stepper``: random actions, ``reset_where`` for ended
envs and one ``observe`` after a step that reset any; until 2026-12-03 the profile observed
after every step, which bench does not, doubling ``observe``'s share), and measures time two
ways, saying which it used:

- **by function**, with ``perf record`` sampling the job's own process at 1999 Hz while it steps
  (``perf report --sort dso,symbol``), when ``perf`` is on the PATH and the kernel lets a
  process be sampled; a release build keeps its symbols, but what rustc inlined is counted in
  the function it was inlined into;
- **by EnvBatch method** (``step``, ``reset_where``, ``observe``), timed by the job's clock
  around each call, with each method's call count: always, and the only figure where perf is
  missing or refused.

``--include-reset`` adds a ``reset`` row: a second batch of ``B`` envs reset whole
(``EnvBatch.reset``) once per loop step, so a costly reset (Leduc's re-deal) shows even where
episodes are long and ``reset_where`` seldom runs; that batch's resets are profiled too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from envforge.bench.suite import run_job
from envforge.errors import EnvforgeError
from envforge.sandbox.base import Sandbox
from envforge.sandbox.jobs import run_job as run_sandboxed_job
from envforge.spec import EnvSpec

SAMPLE_HZ = 1999
STEP_SECONDS = 2.0
"""CPU seconds of stepping sampled (and timed by method); at most a minute of wall time."""
MAX_FUNCTIONS = 40
LOOP = (
    "envforge bench's Rust loop: step, then reset_where of the ended envs and one observe "
    "of the batch after a step that ended any"
)
PROFILE_TIMEOUT_S = 900.0


def _perf_functions(pid: int, run: Any) -> tuple[list[dict[str, Any]], str]:
    """Run ``run()`` while ``perf record`` samples process ``pid``: (functions by share, how
    it was measured); ([], why not) when perf is missing or fails."""
    perf = shutil.which("perf")
    if perf is None:
        run()
        return [], "perf not found on the PATH"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        record = [perf, "record", "-F", str(SAMPLE_HZ), "-p", str(pid), "-o", str(data), "-q"]
        proc = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.3)  # perf attaches
        run()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            return [], "perf record did not stop"
        if proc.returncode not in (0, -signal.SIGINT) or not data.is_file():
            return [], f"perf record failed: {err.decode(errors='replace').strip()[:200]}"
        report = [perf, "report", "-i", str(data), "--stdio", "-q", "--no-children"]
        report += ["--sort", "dso,symbol", "--field-separator=;"]
        done = subprocess.run(report, capture_output=True, text=True, timeout=120)
    rows: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(";")]
        if len(parts) < 3 or not parts[0].endswith("%"):
            continue
        symbol = parts[2].removeprefix("[.] ").removeprefix("[k] ")
        rows.append({"share": float(parts[0][:-1]) / 100, "dso": parts[1], "function": symbol})
    rows.sort(key=lambda r: -r["share"])
    return rows[:MAX_FUNCTIONS], f"perf record -F {SAMPLE_HZ} of the stepping process"


class Timed:
    """An ``EnvBatch`` whose method calls are timed and counted (``hasattr`` sees the same
    methods), so the profile can step it with bench's own loop."""

    def __init__(self, batch: Any) -> None:
        self._batch = batch
        self.spent: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._batch, name)  # AttributeError where the port lacks it
        if not callable(method):
            return method

        def timed(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - started
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed


def _job_profile_rust(
    spec: EnvSpec, port: str, batch: int, include_reset: bool = False
) -> dict[str, Any]:
    from envforge.backends.rust import BATCH_CLASS, RustDriver
    from envforge.bench.rust_loop import stepper

    crate = Path(port).resolve()
    driver = RustDriver(spec, crate)
    batch_class = getattr(driver.module, BATCH_CLASS)
    envs = Timed(batch_class(batch, False))
    envs.reset(np.arange(batch, dtype=np.uint32))
    rng = np.random.default_rng(0)
    one = stepper(spec, envs, batch, "random", {}, rng)
    spare = Timed(batch_class(batch, False)) if include_reset else None
    seeds = [rng.integers(0, 2**32, batch, dtype=np.uint32) for _ in range(16)]
    calls = [0]

    def loop_step() -> None:
        one()
        if spare is not None:
            spare.reset(seeds[calls[0] % 16])
        calls[0] += 1

    def run() -> None:  # CPU seconds, so that a busy machine still gives enough samples
        started, wall = time.process_time(), time.perf_counter()
        while time.process_time() - started < STEP_SECONDS and time.perf_counter() - wall < 60:
            loop_step()

    for _ in range(3):  # warm: threads started, pages touched
        loop_step()
    for timed in (envs, spare):
        if timed is not None:
            timed.spent.clear()
            timed.calls.clear()
    calls[0] = 0
    functions, method = _perf_functions(os.getpid(), run)
    spent: dict[str, float] = {
        name: envs.spent[name] for name in ("step", "reset_where", "observe") if name in envs.spent
    }
    counts: dict[str, int] = {name: envs.calls[name] for name in spent}
    if spare is not None:
        spent["reset"], counts["reset"] = spare.spent.get("reset", 0.0), spare.calls.get("reset", 0)
    loop_s = sum(s for name, s in spent.items() if name != "reset")
    total = sum(spent.values())
    driver.close()
    return {
        "env": spec.name,
        "port_file": crate.name,
        "batch": batch,
        "calls": calls[0],
        "loop": LOOP,
        "include_reset": include_reset,
        "step_s": spent.get("step", 0.0) / max(calls[0], 1),
        "loop_s": loop_s / max(calls[0], 1),
        "steps_per_s": batch * calls[0] / max(loop_s, 1e-9),
        "methods": [
            {"method": name, "seconds": s, "share": s / max(total, 1e-9), "calls": counts[name]}
            for name, s in spent.items()
        ],
        "functions": functions,
        "sampling": method,
    }


def run_profile_rust(
    spec: EnvSpec, port: Path, batch: int, sandbox: Sandbox | None, include_reset: bool = False
) -> dict[str, Any]:
    """The profile of the Rust crate ``port`` at ``batch``, computed in ``sandbox``."""
    args = (spec, str(port), batch, include_reset)
    if sandbox is None:
        result = run_job(_job_profile_rust, args, side="port")
    else:
        # a DriverFailure is the port's: a verdict on it (exit 1), not bad input
        result = run_sandboxed_job(
            sandbox,
            "envforge.bench.profile_rust:_job_profile_rust",
            args,
            readable=(port,),
            timeout_s=PROFILE_TIMEOUT_S,
            what="profile",
            port=port,
        )
    return checked_rust(result)


def checked_rust(result: Any) -> dict[str, Any]:
    """``result`` if it has the Rust profile's form (plain numbers and strings)."""
    bad = EnvforgeError("the profile job sent a result of no known form")
    if not isinstance(result, dict) or not isinstance(result.get("sampling"), str):
        raise bad
    for key, fields in (("methods", ("method",)), ("functions", ("function", "dso"))):
        rows = result.get(key)
        if not isinstance(rows, list) or len(rows) > MAX_FUNCTIONS:
            raise bad
        for row in rows:
            if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in fields):
                raise bad
            if not isinstance(row.get("share"), float):
                raise bad
    if not all(isinstance(result.get(k), int | float) for k in ("batch", "step_s", "steps_per_s")):
        raise bad
    return result
