"""The local executor: jobs run concurrently in threads of this process.

Model calls are I/O-bound, so threads suffice for them. Verification is CPU-bound and its
property-based levels are not thread-safe, so each verification runs in a pool of spawned
worker processes (one per job slot); the implementations it drives get child processes of
their own, as always.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from envforge.batch.gate import Gate
from envforge.batch.plan import JobPlan
from envforge.batch.run_job import conclude, run_job
from envforge.errors import BadInput, EnvforgeError
from envforge.spec import EnvSpec
from envforge.untrusted.orphans import exit_with_parent
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.verdict import Report


def _verify_in_child(
    spec: EnvSpec, port_dir: Path, levels: list[int], options: VerifyOptions
) -> tuple[str, Report | str]:
    try:
        return "ok", verify(spec, port_dir, levels, options)
    except BadInput as e:  # sent back as text: not every BadInput subclass pickles
        return "bad_input", str(e)


class PoolVerifier:
    """A Verifier whose work happens in a process pool shared by the batch's threads."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=mp.get_context("spawn"),
            initializer=exit_with_parent,
            initargs=(os.getpid(),),
        )

    def __call__(
        self, spec: EnvSpec, port_dir: Path, levels: list[int], options: VerifyOptions
    ) -> Report:
        with self._lock:
            pool = self._pool
        try:
            status, value = pool.submit(_verify_in_child, spec, port_dir, levels, options).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = self._new_pool()
            raise EnvforgeError("the verification worker process died; try again") from None
        if isinstance(value, str):
            raise BadInput(value)
        assert status == "ok"
        return value

    def close(self, wait: bool = True) -> None:
        with self._lock:
            self._pool.shutdown(wait=wait, cancel_futures=True)


def run_locally(plans: list[JobPlan], gate: Gate, workers: int) -> None:
    """Run the plans, ``workers`` at a time, in manifest order; returns when all are done."""
    verifier = PoolVerifier(workers)

    def one(plan: JobPlan) -> None:
        gate.start(plan.name)
        conclude(gate, plan, run_job(plan, gate, verifier))

    threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="envforge-job")
    try:
        for future in [threads.submit(one, plan) for plan in plans]:
            future.result()
    except BaseException:  # Ctrl-C: do not wait for running jobs; a rerun resumes them
        threads.shutdown(wait=False, cancel_futures=True)
        verifier.close(wait=False)
        raise
    threads.shutdown()
    verifier.close()
