"""Run the verifier on many mutants in parallel, each in its own process with a time limit.

A worker materializes its mutant, runs ``verify`` on it (whose drivers are isolated in their
own processes, as always), sends the report back, then runs the differential test on the
original and the mutant, each again in its own process unless isolation is off (light for
killed mutants, full for survivors), and sends that. The parent keeps at most
``jobs`` workers alive, and stops one that passes its time limit with SIGTERM (the worker's
``verify`` then closes its drivers) and, if need be, SIGKILL.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from envforge.mutate.mutant import Mutant
from envforge.mutate.workspace import Target
from envforge.verify.context import VerifyOptions

GRACE_S = 10.0


@dataclass(frozen=True)
class MutantJob:
    target: Target
    mutant: Mutant
    workdir: Path
    levels: tuple[int, ...]
    options: VerifyOptions
    original: str = ""
    """The unmutated source of the mutated file."""
    differential: bool = True


@dataclass
class MutantRun:
    """What came back from one worker (raw; judged in ``mutation_report.py``)."""

    job: MutantJob
    report: dict[str, Any] | None = None
    first_finding: dict[str, Any] | None = None
    differential: dict[str, Any] | None = None
    error: str = ""
    timed_out: bool = False
    phase: str = "starting"
    wall_s: float = 0.0
    messages: list[str] = field(default_factory=list)
    retimed_from: float | None = None
    """Set when this is the re-run of a mutant whose first verify hit a call timeout: that
    run's call limit (``campaign.RETIME_FACTOR`` times it applied here)."""


def _worker(job: MutantJob, conn: Connection) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds verify's finally
    from envforge.mutate.differential import FULL, LIGHT, Differential
    from envforge.mutate.triage import reaches_reset
    from envforge.mutate.workspace import materialize, recipes
    from envforge.sandbox.driver import open_sandboxed
    from envforge.sandbox.select import open_sandbox
    from envforge.verify.checked import CheckedDriver
    from envforge.verify.runner import verify

    try:
        spec, port = materialize(job.target, job.mutant, job.workdir)
        report = verify(
            spec,
            port,
            list(job.levels),
            job.options,
            progress=lambda msg: conn.send(("phase", f"verify {msg}")),
        )
        finding = report.first_finding()
        conn.send(("report", report.to_dict(), finding.to_dict() if finding else None))
        if not job.differential:
            return
        conn.send(("phase", "differential"))
        original, mutated = recipes(job.target, spec, port, job.options.strict_float)
        # each side in its own process, as in verify: a call that hangs (MJX on jaxlib 0.10's
        # LAPACK kernels once did, envforge/kit/xla_cpu.py) or crashes meets the spec's call limit
        # and ends its own process, not the worker's limit
        if not job.options.isolate:
            os.environ.update(original.env)  # strict XLA flags, before jax is imported here
        timeout_s = job.options.timeout_s
        # checked drivers cast to the spec's dtypes, as the verifier's levels see them
        # a port in the campaign's sandbox, as verify opens it (None: --sandbox none); a
        # reference (our code) in its own process, as verify opens it
        sandbox = open_sandbox(job.options.sandbox) if original.side == "port" else None
        sides = [
            CheckedDriver(open_sandboxed(r, sandbox, job.options.isolate, timeout_s))
            for r in (original, mutated)
        ]
        diff = Differential(sides[0], sides[1], job.options.seed)
        effort, label = (FULL, "full") if report.passed else (LIGHT, "light")
        # a survivor, or a kill by a reset difference that sampled seeds may not meet (the
        # verifier's exhaustive sweep): find the differing fields over every seed too
        reset_kill = finding is not None and finding.check == "reset.mismatch"
        if (report.passed or reset_kill) and reaches_reset(job.mutant, job.original):
            effort = dataclasses.replace(effort, all_seeds=True)
        try:
            conn.send(("differential", diff.run(effort, label).to_dict()))
        finally:
            for side in sides:
                side.close()
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"))


class _Running:
    def __init__(self, job: MutantJob, ctx: Any) -> None:
        self.run = MutantRun(job)
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_worker, args=(job, child), daemon=False)
        self.proc.start()
        child.close()
        self.start = time.monotonic()
        self.stopping_since: float | None = None

    def drain(self) -> None:
        while self.conn.poll():
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return
            kind = msg[0]
            if kind == "phase":
                self.run.phase = msg[1]
            elif kind == "report":
                self.run.report, self.run.first_finding = msg[1], msg[2]
                self.run.phase = "verified"
            elif kind == "differential":
                self.run.differential = msg[1]
            elif kind == "error":
                self.run.error = msg[1]

    def stop(self, now: float) -> None:
        if self.stopping_since is None:
            self.stopping_since = now
            self.proc.terminate()
        elif now - self.stopping_since > GRACE_S and self.proc.is_alive():
            self.proc.kill()


def run_jobs(
    jobs: list[MutantJob],
    parallel: int,
    time_limit_s: float,
    on_done: Callable[[MutantRun], None] | None = None,
) -> list[MutantRun]:
    """Run every job, at most ``parallel`` at once; results in the order of ``jobs``."""
    ctx = mp.get_context("spawn")
    pending = list(enumerate(jobs))
    running: dict[int, _Running] = {}
    done: dict[int, MutantRun] = {}
    while pending or running:
        while pending and len(running) < parallel:
            index, job = pending.pop(0)
            running[index] = _Running(job, ctx)
        waitables: list[Any] = [r.conn for r in running.values()]
        waitables += [r.proc.sentinel for r in running.values()]
        wait(waitables, timeout=1.0)
        now = time.monotonic()
        for index, r in list(running.items()):
            r.drain()
            limit = time_limit_s if r.run.report is None else 2 * time_limit_s
            if r.proc.is_alive() and now - r.start > limit:
                r.run.timed_out = True
                r.stop(now)
            if not r.proc.is_alive():
                r.proc.join()
                r.drain()
                r.conn.close()
                r.run.wall_s = now - r.start
                if r.run.report is None and not r.run.error and not r.run.timed_out:
                    r.run.error = f"worker died (exit code {r.proc.exitcode}) during {r.run.phase}"
                done[index] = r.run
                del running[index]
                if on_done:
                    on_done(r.run)
    return [done[i] for i in range(len(jobs))]
