"""Run a batch: validate every job, take the batch's lock, recover from an earlier crash, and
hand the unfinished jobs to an executor. Running the same manifest again resumes it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.console import Console

from envforge.batch.batch_report import BatchReport, build_report
from envforge.batch.gate import Gate
from envforge.batch.manifest import Manifest
from envforge.batch.plan import JobPlan, plan_jobs, with_sandbox
from envforge.batch.progress import LiveProgress
from envforge.batch.store import FINISHED, BatchStore, JobKey
from envforge.errors import BadInput

Executor = Literal["local", "ray"]


@dataclass(frozen=True)
class RunOptions:
    workers: int | None = None
    """Jobs at once; None: the manifest's ``[batch] workers``."""
    executor: Executor | None = None
    """None: the manifest's ``[batch] executor``."""
    address: str | None = None
    """Ray cluster address; None: the manifest's, else a local Ray."""
    sandbox: str | None = None
    """docker | process | none, already resolved (see envforge/sandbox/select.py); None: none."""


@contextmanager
def batch_lock(db_path: Path) -> Iterator[None]:
    """One driver per batch: a second ``batch run`` of the same manifest is refused. The OS
    drops the lock when the driver dies, however it dies."""
    path = db_path.with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise BadInput(f"batch {db_path.stem} is already running ({holder})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_batch(
    manifest: Manifest,
    options: RunOptions | None = None,
    console: Console | None = None,
    plans: list[JobPlan] | None = None,
) -> BatchReport:
    """Run (or resume) every unfinished job; returns the final report. ``plans``: the
    manifest's plans when the caller has made them already (``plan_jobs``)."""
    options = options or RunOptions()
    settings = manifest.settings
    workers = options.workers or settings.workers
    if workers < 1:
        raise BadInput("--workers must be at least 1")
    executor = options.executor or settings.executor
    if plans is None:
        plans = plan_jobs(manifest)  # everything refusable is refused before any call
    if options.sandbox is not None:  # where the ports run is not part of a job's identity
        plans = [with_sandbox(p, options.sandbox) for p in plans]
    console = console or Console(stderr=True)
    with batch_lock(manifest.db_path), BatchStore(manifest.db_path) as store:
        keys = [JobKey(p.name, p.config_digest, p.spec.name) for p in plans]
        for name in store.sync_jobs(keys):
            console.print(f"{name}: its manifest entry changed; it starts afresh")
        for name in store.recover():
            console.print(f"{name}: was running when the batch stopped; resuming it")
        states = {row.name: row.state for row in store.jobs()}
        todo = [p for p in plans if states.get(p.name) not in FINISHED]
        gate = Gate(store, settings.total_budget_usd, {p.name: p.budget_usd for p in plans})
        with LiveProgress(gate, manifest.name, console):
            _execute(todo, gate, workers, executor, options.address or settings.address)
        return build_report(manifest, store)


def _execute(
    plans: list[JobPlan], gate: Gate, workers: int, executor: Executor, address: str | None
) -> None:
    if not plans:
        return
    if executor == "ray":
        from envforge.batch.executors.ray_executor import run_on_ray

        run_on_ray(plans, gate, workers, address)
    else:
        from envforge.batch.executors.local import run_locally

        run_locally(plans, gate, workers)
