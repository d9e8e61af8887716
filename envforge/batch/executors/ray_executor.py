"""The Ray executor: each job is a Ray task with declared resources; the store stays local.

Workers never open the batch's SQLite file (it may be on another machine). Every gate request
a worker makes (replay lookup, reservation, ledger row plus call log, memo, progress) goes to a
small relay actor; the driver takes requests from the relay, applies them to the Gate in its
own process (one transaction each) and answers; the worker waits for the answer before it
goes on. So the exactly-once and total-budget guarantees are the local executor's.

Ray is imported only here, and only when this executor is chosen.
"""

from __future__ import annotations

import asyncio
from typing import Any

from envforge.agents.model import one_line
from envforge.batch.gate import CHANNEL_OPS, CallRecord, Gate, Grant, ProgressUpdate, Refusal
from envforge.batch.plan import JobPlan
from envforge.batch.run_job import JobReturn, conclude, run_job
from envforge.batch.store import JobOutcome, LoggedCall
from envforge.errors import BadInput, EnvforgeError

TAKE_WAIT_S = 0.2
TASK_RETRIES = 2
"""A task whose worker process died is run again; it resumes from the call log."""


class Relay:
    """Actor: workers' ``call`` waits until the driver has ``answer``-ed what it ``take``-s."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[int, str, tuple[Any, ...]]] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[tuple[str, Any]]] = {}
        self.next_id = 0

    async def call(self, op: str, args: tuple[Any, ...]) -> tuple[str, Any]:
        ident, self.next_id = self.next_id, self.next_id + 1
        future: asyncio.Future[tuple[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[ident] = future
        self.queue.put_nowait((ident, op, args))
        return await future

    async def take(self, wait_s: float) -> list[tuple[int, str, tuple[Any, ...]]]:
        try:
            items = [await asyncio.wait_for(self.queue.get(), wait_s)]
        except TimeoutError:
            return []
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        return items

    async def answer(self, ident: int, reply: tuple[str, Any]) -> None:
        future = self.waiting.pop(ident, None)
        if future is not None and not future.done():
            future.set_result(reply)


class RelayChannel:
    """A worker's Channel: each request is relayed to the driver and acknowledged."""

    def __init__(self, relay: Any) -> None:
        self.relay = relay

    def _ask(self, op: str, *args: Any) -> Any:
        import ray

        status, value = ray.get(self.relay.call.remote(op, args))
        if status != "ok":
            raise EnvforgeError(f"batch driver refused {op}: {value}")
        return value

    def logged_call(self, job: str, seq: int) -> LoggedCall | None:
        result: LoggedCall | None = self._ask("logged_call", job, seq)
        return result

    def reserve(self, job: str, worst_case: Any) -> Grant | Refusal:
        result: Grant | Refusal = self._ask("reserve", job, worst_case)
        return result

    def settle(self, reservation: int, record: CallRecord) -> None:
        self._ask("settle", reservation, record)

    def release(self, reservation: int) -> None:
        self._ask("release", reservation)

    def memo_get(self, kind: str, key: str) -> bytes | None:
        result: bytes | None = self._ask("memo_get", kind, key)
        return result

    def memo_put(self, kind: str, key: str, value: bytes) -> None:
        self._ask("memo_put", kind, key, value)

    def progress(self, job: str, update: ProgressUpdate) -> None:
        self.relay.call.remote("progress", (job, update))  # display only: no need to wait


def run_remote(plan: JobPlan, relay: Any) -> JobReturn:
    """The Ray task: the job runs (and verifies) in this worker process."""
    return run_job(plan, RelayChannel(relay))


def _dispatch(gate: Gate, op: str, args: tuple[Any, ...]) -> tuple[str, Any]:
    if op not in CHANNEL_OPS:
        return "error", f"unknown request {op!r}"
    try:
        return "ok", getattr(gate, op)(*args)
    except Exception as e:  # the worker turns it into the job's error
        return "error", one_line(f"{type(e).__name__}: {e}")


def _too_big(plan: JobPlan, resources: dict[str, float]) -> str | None:
    for kind, wanted in (("CPU", plan.num_cpus), ("GPU", plan.num_gpus)):
        have = resources.get(kind, 0.0)
        if wanted > have:
            return f"needs {wanted:g} {kind}(s) per task; the Ray cluster has {have:g}"
    return None


def run_on_ray(plans: list[JobPlan], gate: Gate, workers: int, address: str | None) -> None:
    """Run the plans as Ray tasks, ``workers`` at a time; returns when all are done."""
    try:
        import ray
    except ImportError:
        raise BadInput("--executor ray needs Ray: pip install 'envforge[ray]'") from None
    owns = not ray.is_initialized()
    if owns:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise BadInput(f"cannot start or reach Ray ({address or 'local'}): {e}") from None
    try:
        _drive(ray, plans, gate, workers)
    finally:
        if owns:
            ray.shutdown()


def _drive(ray: Any, plans: list[JobPlan], gate: Gate, workers: int) -> None:
    relay = ray.remote(num_cpus=0, max_concurrency=1000)(Relay).remote()
    task = ray.remote(run_remote)
    resources = ray.cluster_resources()
    queue: list[JobPlan] = list(plans)
    running: dict[Any, JobPlan] = {}
    while queue or running:
        while queue and len(running) < workers:
            plan = queue.pop(0)
            gate.start(plan.name)
            problem = _too_big(plan, resources)
            if problem is not None:
                conclude(gate, plan, _error(problem))
                continue
            options = {"num_cpus": plan.num_cpus, "num_gpus": plan.num_gpus}
            ref = task.options(**options, max_retries=TASK_RETRIES, name=f"envforge-{plan.name}")
            running[ref.remote(plan, relay)] = plan
        for ident, op, args in ray.get(relay.take.remote(TAKE_WAIT_S)):
            relay.answer.remote(ident, _dispatch(gate, op, args))
        if running:
            done, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
            for ref in done:
                plan = running.pop(ref)
                try:
                    returned = ray.get(ref)
                except Exception as e:  # the task itself failed (worker lost, retries spent)
                    returned = _error(f"Ray task failed: {one_line(e)}")
                conclude(gate, plan, returned)
    ray.kill(relay)


def _error(message: str) -> JobReturn:
    return JobReturn(JobOutcome("error", "error", message, 0, None, (), None, None))
