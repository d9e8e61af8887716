"""One translation job end to end: model + price + ledger + budget → repair loop → landed port.

Everything that can be refused (unknown model, unknown price, no key, a foreign --out folder)
is checked before the first call, so bad input costs nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from envforge.agents.messages import Model
from envforge.agents.select import ModelOptions, open_model, provider_of
from envforge.cost.budget import Budget
from envforge.cost.ledger import Ledger
from envforge.cost.meter import Meter, MeteredModel
from envforge.cost.prices import Price, load_price_table
from envforge.prompts.render import target
from envforge.sandbox.base import Sandbox
from envforge.spec import EnvSpec
from envforge.translate.orchestrate import (
    Measurer,
    ProgressFn,
    RepairConfig,
    RepairLoop,
    RepairResult,
    Verifier,
)
from envforge.translate.progress import RunState
from envforge.translate.provenance import RunIdentity, provenance_markdown
from envforge.translate.workspace import check_out_dir, land

MeterFactory = Callable[[Model, Price, str, str], Meter]
"""(model, price, job, run) -> the meter the loop calls through, in place of a MeteredModel on
the job's ledger (a batch meters against its own store and a shared budget)."""


@dataclass(frozen=True)
class TranslateJob:
    spec: EnvSpec
    model: str
    """Selects the provider: claude-…, gemini-…, openai:…, replay:…"""
    config: RepairConfig = field(default_factory=RepairConfig)
    budget_usd: Decimal | None = Decimal("2")
    out: Path | None = None
    workspace: Path | None = None
    """Default: .envforge/runs/<run id>."""
    job: str | None = None
    """Ledger job name; reuse one to make runs share (and resume) its budget."""
    ledger: Path | None = None
    price: Price | None = None
    """Rates the user gave (e.g. for a local model); None: look the model up in the price table."""
    model_options: ModelOptions = field(default_factory=ModelOptions)
    run: str | None = None
    """Run id in the ledger; default a fresh timestamped one (a batch uses a stable id)."""


@dataclass
class TranslateOutcome:
    result: RepairResult
    job: str
    run: str
    model: str
    price: Price
    calls: int
    cost_usd: Decimal
    job_spent_usd: Decimal
    out: Path | None

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "status": r.status,
            "verified": r.verified,
            "message": r.message,
            "model": self.model,
            "job": self.job,
            "run": self.run,
            "iterations": [it.to_dict() for it in r.iterations],
            "levels_passed": r.levels_passed,
            "calls": self.calls,
            "cost_usd": str(self.cost_usd),
            "job_spent_usd": str(self.job_spent_usd),
            "price_version": self.price.version,
            "workspace": str(r.workspace),
            "retry_wait_s": round(sum(it.retry_wait_s for it in r.iterations), 1),
            "last_verify": r.last_verify,
            "out": str(self.out) if self.out else None,
            "report": r.report.to_dict() if r.report else None,
        }


def new_run_id(spec: EnvSpec, target: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{spec.name}-{target}-{stamp}-{secrets.token_hex(2)}"


def pricing_name(model: Model, requested: str) -> str:
    """Replays are priced as the model they recorded, scripts as the model they name."""
    return model.name if provider_of(requested) in ("replay", "scripted") else requested


def run_translate_job(
    job: TranslateJob,
    model: Model | None = None,
    sandbox: Sandbox | None = None,
    progress: ProgressFn | None = None,
    meter: MeterFactory | None = None,
    verifier: Verifier | None = None,
    measurer: Measurer | None = None,
    state: RunState | None = None,
) -> TranslateOutcome:
    """Run a job. ``model`` overrides ``job.model`` (tests pass a scripted model).

    With ``meter`` no ledger is opened here: the meter records every call, and what it counted
    is the job's spend. ``state`` is kept up to date for a live view."""
    target(job.config.target)
    if job.out is not None:
        check_out_dir(job.out)
    live = model if model is not None else open_model(job.model, job.model_options)
    name = pricing_name(live, job.model) if model is None else live.name
    price = job.price or load_price_table().price_for(name)
    run = job.run or new_run_id(job.spec, job.config.target)
    job_name = job.job or f"translate-{run}"
    workspace = job.workspace or Path(".envforge") / "runs" / run
    if state is not None:
        state.update(budget_usd=job.budget_usd)

    def execute(metered: Meter) -> tuple[RepairResult, Path | None]:
        loop = RepairLoop(
            job.spec, metered, workspace, job.config, sandbox, progress, verifier, measurer, state
        )
        result = loop.run()
        out = None
        if job.out is not None and loop.ws.has_port():
            identity = RunIdentity(name, job_name, run, price.version)
            land(loop.ws, job.out, provenance_markdown(job.spec, result, job.config, identity))
            out = job.out
        return result, out

    if meter is not None:
        metered = meter(live, price, job_name, run)
        result, out = execute(metered)
        spent = metered.cost_usd
    else:
        with Ledger(job.ledger) as ledger:
            metered = MeteredModel(live, price, ledger, Budget(job.budget_usd), job_name, run)
            result, out = execute(metered)
            spent = ledger.spent(job=job_name)
    return TranslateOutcome(
        result, job_name, run, name, price, metered.calls, metered.cost_usd, spent, out
    )
