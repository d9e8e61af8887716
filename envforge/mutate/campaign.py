"""A mutation campaign: generate, sample, run in parallel, judge, report."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from envforge.mutate.execute import MutantJob, MutantRun, run_jobs
from envforge.mutate.generate import generate, sample
from envforge.mutate.handlers import HandlerMap
from envforge.mutate.mutant import Mutant
from envforge.mutate.mutation_report import MutationReport, judge
from envforge.mutate.sweep_plan import plan_sweep
from envforge.mutate.workspace import Target
from envforge.verify.context import VerifyOptions

Progress = Callable[[int, int, MutantRun], None]

RETIME_FACTOR = 4.0
"""A mutant whose verify ended in a ``timeout`` finding runs once more with this many times the
call time limit: a hang times out again (a kill, as mutation tools count a mutant that loops
forever), while a call that was only slow on a loaded machine now finishes and is judged by
what the verifier finds (on 2026-12-01, 3 halfcheetah and 10 battle "kills" were such)."""


def timed_out_call(run: MutantRun) -> bool:
    """The mutant's verify stopped at a driver call over its time limit."""
    return run.first_finding is not None and run.first_finding.get("check") == "timeout"


def _retime(
    runs: list[MutantRun], spec_timeout_s: float, parallel: int, time_limit_s: float
) -> list[MutantRun]:
    """Re-run the mutants killed by a call timeout with ``RETIME_FACTOR`` times the limit."""
    again = [i for i, r in enumerate(runs) if timed_out_call(r)]
    if not again:
        return runs
    jobs = []
    for i in again:
        job = runs[i].job
        limit = (job.options.timeout_s or spec_timeout_s) * RETIME_FACTOR
        jobs.append(replace(job, options=replace(job.options, timeout_s=limit)))
    redone = run_jobs(jobs, parallel, time_limit_s * RETIME_FACTOR)
    out = list(runs)
    for i, run in zip(again, redone, strict=True):
        run.retimed_from = runs[i].job.options.timeout_s or spec_timeout_s
        run.wall_s += runs[i].wall_s
        out[i] = run
    return out


def run_campaign(
    target: Target,
    levels: list[int],
    options: VerifyOptions,
    limit: int | None = None,
    seed: int = 0,
    parallel: int = 2,
    time_limit_s: float = 900.0,
    only: list[str] | None = None,
    progress: Progress | None = None,
    differential: bool = True,
    note: Callable[[str], None] | None = None,
    sample_order: str = "sorted",
) -> MutationReport:
    """Mutate ``target``'s files, verify each sampled mutant, and judge the results."""
    start = time.perf_counter()
    plan: dict[str, object] = {}
    if options.seed_sweep is None:
        # every mutant gets the same reset sweep: never one cut short by a busy machine
        sweep, plan = plan_sweep(target, levels, options, parallel, note or (lambda _: None))
        options = replace(options, seed_sweep=sweep)
    originals: dict[str, str] = {}
    mutants: list[Mutant] = []
    generated = stillborn = exempt = 0
    several = len(target.files) > 1  # ids are per file (operator:line:k): then prefix the file
    for path in target.files:
        rel = str(path.relative_to(target.root))
        gen = generate(path, rel, target.spec)
        originals[rel] = gen.original
        generated += len(gen.mutants)
        stillborn += gen.stillborn
        exempt += gen.exempt
        mutants.extend(replace(m, id=f"{rel}:{m.id}") if several else m for m in gen.mutants)
    chosen = (
        [m for m in mutants if m.id in set(only)]
        if only
        else sample(mutants, limit, seed, sample_order)
    )
    report = MutationReport(
        env=target.spec.name,
        side=target.side,
        files=list(originals),
        levels=levels,
        options={
            **asdict(options),
            "limit": limit,
            "sample_seed": seed,
            "sample_order": sample_order,
            "parallel": parallel,
            "seed_sweep_plan": plan,
        },
        generated=generated,
        stillborn=stillborn,
        exempt=exempt,
    )
    with tempfile.TemporaryDirectory(prefix="envforge-mutants-") as tmp:
        jobs = [
            MutantJob(target, m, Path(tmp), tuple(levels), options, originals[m.file], differential)
            for m in chosen
        ]
        finished = [0]

        def on_done(run: MutantRun) -> None:
            finished[0] += 1
            if progress:
                progress(finished[0], len(jobs), run)

        runs = run_jobs(jobs, parallel, time_limit_s, on_done)
        runs = _retime(runs, target.spec.verify.timeout_s, parallel, time_limit_s)
    fields = target.spec.field_names
    handlers = HandlerMap.for_spec(target.spec, originals)
    report.handlers = handlers is not None
    report.outcomes = [judge(r, originals[r.job.mutant.file], fields, handlers) for r in runs]
    report.wall_s = time.perf_counter() - start
    return report
