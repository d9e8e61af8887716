"""One batch job, where it runs (a thread of the batch's main process, the Ray "driver", or a Ray
worker), and its landing.

The job starts from a clean workspace every time. On a restart its calls come back from the
call log and its verifications from the store, so it replays to where it was killed in seconds
and at no cost, then carries on live. The worker never touches the store itself: everything
goes through its Channel. The port comes back as files and lands on the driver's disk.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from envforge.agents.messages import Model
from envforge.agents.model import one_line
from envforge.agents.select import open_model
from envforge.batch.gate import Channel, Gate, ProgressUpdate
from envforge.batch.memo import CachedVerifier, cached_measurer
from envforge.batch.meter import BatchMeter
from envforge.batch.plan import JobPlan
from envforge.batch.store import JobOutcome
from envforge.cost.prices import Price
from envforge.errors import EnvforgeError
from envforge.sandbox.select import open_sandbox
from envforge.spec import EnvSpec
from envforge.translate.job import TranslateJob, TranslateOutcome, run_translate_job
from envforge.translate.orchestrate import Iteration, Measurer, Verifier
from envforge.translate.provenance import RunIdentity, provenance_markdown
from envforge.translate.throughput import Throughput, measure_sandboxed
from envforge.translate.workspace import land_atomically
from envforge.untrusted.port_files import list_port
from envforge.verify.runner import verify

STATES = {
    "verified": "passed",
    "iteration_limit": "failed",
    "time_limit": "failed",
    "budget": "budget-exhausted",
    "model_error": "error",
}


@dataclass(frozen=True)
class JobReturn:
    """What a worker sends back: the outcome, and the port to land (files by relative path)."""

    outcome: JobOutcome
    port_files: dict[str, bytes] = field(default_factory=dict)
    provenance: str = ""


def run_job(
    plan: JobPlan,
    channel: Channel,
    verifier: Verifier = verify,
    measurer: Measurer | None = None,
) -> JobReturn:
    """Run (or resume) one job; every failure becomes an ``error`` outcome, never an exception."""
    shutil.rmtree(plan.workspace, ignore_errors=True)
    meters: list[BatchMeter] = []

    def meter(model: Model, price: Price, job: str, run: str) -> BatchMeter:
        meters.append(BatchMeter(model, price, channel, job, run))
        return meters[-1]

    def progress(message: str) -> None:
        channel.progress(plan.name, ProgressUpdate(activity=message))

    job = TranslateJob(
        spec=plan.spec,
        model=plan.model,
        config=plan.config,
        budget_usd=None,  # the gate enforces the job's and the batch's budgets
        workspace=plan.workspace,
        job=plan.name,
        price=plan.price,
        run=plan.run,
    )
    try:
        model = open_model(plan.model, root=plan.root)
        commands = plan.config.verify.sandbox
        outcome = run_translate_job(
            job,
            model=model,
            sandbox=open_sandbox("process" if commands in (None, "none") else commands),
            progress=progress,
            meter=meter,
            verifier=CachedVerifier(channel, plan.name, verifier),
            measurer=cached_measurer(channel, measurer or measure_in(plan)),
        )
    except EnvforgeError as e:
        return _failed(meters, one_line(e, 500))
    except Exception as e:  # a bug in one job must not take the batch down
        return _failed(meters, one_line(f"{type(e).__name__}: {e}", 500))
    return _finished(plan, outcome)


def measure_in(plan: JobPlan) -> Measurer:
    """Throughput timed by the host around the port's driver in the job's verify sandbox."""
    kind = plan.config.verify.sandbox

    def measured(spec: EnvSpec, port_dir: Path, batch: int) -> Throughput | str:
        return measure_sandboxed(spec, port_dir, batch, sandbox_kind=kind)

    return measured


def _failed(meters: list[BatchMeter], message: str) -> JobReturn:
    iterations = meters[0].iteration if meters else 0
    return JobReturn(JobOutcome("error", "error", message, iterations, None, (), None, None))


def _finished(plan: JobPlan, outcome: TranslateOutcome) -> JobReturn:
    result = outcome.result
    iterations = result.iterations
    state = JobOutcome(
        state=STATES.get(result.status, "error"),
        status=result.status,
        message=result.message,
        iterations=len(iterations),
        best_level=best_level(iterations),
        levels_passed=tuple(result.levels_passed),
        steps_per_second=final_steps_per_second(iterations),
        out=None,
    )
    listed = list_port(result.workspace / "port", follow_root=False)  # no link followed
    files = {
        name: data
        for name in listed.names
        if (data := listed.read_bytes(name, 1 << 30)) is not None
    }
    if not files:
        return JobReturn(state)
    identity = RunIdentity(outcome.model, outcome.job, outcome.run, outcome.price.version)
    provenance = provenance_markdown(plan.spec, result, plan.config, identity)
    return JobReturn(state, files, provenance)


def best_level(iterations: list[Iteration]) -> int | None:
    """The highest level any iteration reached, passing every level below it."""
    best = None
    for it in iterations:
        for level in sorted(it.level_status):
            if it.level_status[level] != "pass":
                break
            best = level if best is None else max(best, level)
    return best


def final_steps_per_second(iterations: list[Iteration]) -> float | None:
    """Throughput of the port that stayed: the last measured iteration that was not undone."""
    kept = [
        it.steps_per_second
        for it in iterations
        if it.steps_per_second and not it.finding.startswith("undone")
    ]
    return kept[-1] if kept else None


def land(plan: JobPlan, returned: JobReturn) -> JobOutcome:
    """Write the returned port and PROVENANCE.md to the job's ``out`` (on the driver)."""
    outcome = returned.outcome
    if not returned.port_files:
        return outcome
    out = plan.out

    def fill(folder: Path) -> None:
        for rel, data in returned.port_files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)

    try:
        land_atomically(out, fill, returned.provenance)
    except (EnvforgeError, OSError) as e:
        message = f"{outcome.message}; could not land the port in {out}: {one_line(e)}"
        return replace(outcome, state="error", message=message)
    return replace(outcome, out=str(out))


def conclude(gate: Gate, plan: JobPlan, returned: JobReturn) -> None:
    """Land the port, then record the outcome (a kill in between re-runs the job by replay)."""
    gate.finish(plan.name, land(plan, returned))
