"""From manifest entries to runnable job plans, refusing bad input before anything is spent.

A plan is plain, picklable data (it travels to Ray workers): the loaded spec, the repair
config, the price, and absolute paths for the workspace and the landing folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from envforge.agents.loop import AgentLimits
from envforge.agents.select import open_model
from envforge.backends.reference_check import check_reference
from envforge.batch.manifest import JobEntry, Manifest
from envforge.cost.prices import Price, load_price_table, price_from_options
from envforge.errors import BadInput
from envforge.prompts.render import target
from envforge.resolve import resolve_spec
from envforge.spec import EnvSpec, reference_file, references_dirs
from envforge.translate.orchestrate import RepairConfig
from envforge.translate.workspace import check_out_dir
from envforge.verify.context import VerifyOptions
from envforge.verify.levels import parse_levels


@dataclass(frozen=True)
class JobPlan:
    name: str
    run: str
    """The ledger's run id: stable across restarts, so a resumed job's rows match."""
    spec: EnvSpec
    model: str
    root: Path
    """The manifest's folder (``scripted:`` and ``replay:`` paths are relative to it)."""
    config: RepairConfig
    price: Price | None
    """Rates from the manifest; None: the price table's rates for the model."""
    budget_usd: Decimal | None
    workspace: Path
    out: Path
    config_digest: str
    """Changes when anything that shapes the job's calls changes (then its call log is void)."""
    num_cpus: float
    num_gpus: float
    reference_steps_per_second: float | None


def plan_jobs(manifest: Manifest) -> list[JobPlan]:
    """Every job's plan; raises BadInput naming the job at the first problem."""
    plans = [_plan(manifest, entry) for entry in manifest.jobs]
    outs = [plan.out for plan in plans]
    for plan in plans:
        if outs.count(plan.out) > 1:
            raise BadInput(
                f"{manifest.path}: job {plan.name}: another job also lands in {plan.out}"
            )
    return plans


def _plan(manifest: Manifest, entry: JobEntry) -> JobPlan:
    where = f"{manifest.path}: job {entry.name}"
    try:
        spec = _spec(manifest, entry)
        check_reference(spec)  # a reference that cannot build would fail every verify
        target(entry.target)
        model = open_model(entry.model, root=manifest.root)
        price = price_from_options(
            entry.price_in, entry.price_out, entry.price_cache_read, entry.price_cache_write
        )
        if price is None:
            load_price_table().price_for(model.name)
        out = (
            manifest.resolve(entry.out)
            if entry.out
            else manifest.root / "generated" / spec.name / f"{entry.target}-{entry.name}"
        )
        check_out_dir(out)
    except BadInput as e:
        raise BadInput(f"{where}: {e}") from None
    levels = parse_levels(entry.levels)
    config = RepairConfig(
        target=entry.target,
        levels=tuple(lv for lv in levels if lv < 4),
        transfer=4 in levels,
        max_iters=entry.max_iters,
        max_wall_s=None if entry.max_minutes is None else entry.max_minutes * 60,
        agent=AgentLimits(max_steps=entry.max_steps, max_tokens=entry.max_tokens),
        verify=VerifyOptions(seed=entry.seed, scale=entry.scale),
        optimize_rounds=entry.optimize,
    )
    return JobPlan(
        name=entry.name,
        run=f"{manifest.name}/{entry.name}",
        spec=spec,
        model=entry.model,
        root=manifest.root,
        config=config,
        price=price,
        budget_usd=entry.budget_usd,
        workspace=manifest.state_dir / f"batch-{manifest.name}" / entry.name,
        out=out,
        config_digest=hashlib.sha256(entry.model_dump_json().encode()).hexdigest(),
        num_cpus=entry.num_cpus,
        num_gpus=entry.num_gpus,
        reference_steps_per_second=entry.reference_steps_per_second,
    )


def _spec(manifest: Manifest, entry: JobEntry) -> EnvSpec:
    """``ref`` as ``envforge translate --ref`` takes it (files relative to the manifest), or
    the name of a known env; ``spec``, when given, describes that reference. The resolver
    every command uses decides (``envforge/resolve.py``); only the paths are the manifest's."""
    spec = str(manifest.resolve(entry.spec)) if entry.spec is not None else None
    source = reference_file(entry.ref)
    if source is not None and not manifest.resolve(str(source)).exists():
        known = any((refs / entry.ref / "env.toml").is_file() for refs in references_dirs())
        if known and spec is None:
            return resolve_spec(entry.ref, command="batch")
    ref = entry.ref
    if source is not None and not source.is_absolute():
        ref = str(manifest.root / entry.ref)
    return resolve_spec(None, ref, spec, command="batch")


def with_sandbox(plan: JobPlan, sandbox: str) -> JobPlan:
    """The plan with its verification (and agent commands) in the given sandbox."""
    verify = dataclasses.replace(plan.config.verify, sandbox=sandbox)
    return dataclasses.replace(plan, config=dataclasses.replace(plan.config, verify=verify))
