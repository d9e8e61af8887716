"""`envforge mutate`: how often would the verifier let a wrong port through?"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from envforge.commands import options
from envforge.errors import BadInput
from envforge.resolve import resolve_spec
from envforge.sandbox.select import choose_sandbox
from envforge.spec import bounds
from envforge.targets import default_target
from envforge.untrusted.shown import one_line
from envforge.verify.context import VerifyOptions
from envforge.verify.levels import DEFAULT_LEVELS, parse_levels
from envforge.verify.runner import parse_seed_sweep


def mutate_command(
    env: options.EnvOrRef = None,
    ref: options.Ref = None,
    spec_path: options.Spec = None,
    target: options.Target = default_target(),
    port: options.Port = None,
    side: str = typer.Option(
        "port", "--side", help="Mutate the port (default) or the C/Python reference."
    ),
    max_mutants: int = typer.Option(
        40, "--max", min=0, help="Mutants to run, sampled across operators (0 = all)."
    ),
    sample_order: str = typer.Option(
        "sorted",
        "--sample-order",
        help="With --max below the operator count: operators take turns by name (sorted, "
        "the recorded campaigns' picks) or in an order shuffled by --seed (shuffled).",
    ),
    mutant_ids: list[str] = typer.Option(
        None, "--mutant", help="Run only these mutant ids (repeatable), e.g. compare:133:1."
    ),
    levels: options.Levels = DEFAULT_LEVELS,
    seed: options.Seed = 0,
    scale: options.Scale = 1.0,
    seed_sweep: options.SeedSweep = None,
    jobs: int = typer.Option(
        0, "--jobs", min=0, help="Mutants verified at once (0 = one per CPU core)."
    ),
    time_limit: float = typer.Option(
        900.0,
        "--time-limit",
        callback=bounds.option(bounds.SECONDS),
        help="Seconds one mutant's verify may take before it is stopped.",
    ),
    no_differential: bool = typer.Option(
        False, "--no-differential", help="Skip the differential test (no triage/localization)."
    ),
    sandbox: options.Sandbox = "auto",
    as_json: options.Json = False,
    out: str = typer.Option(None, "--out", help="Also write the JSON report to this file."),
    combine: int = typer.Option(
        0,
        "--combine",
        min=0,
        help="Apply K mutants together (K >= 2), --max combinations, each verified once for "
        "every group: the share whose every component's line the groups show.",
    ),
    killed_from: Path = typer.Option(
        None,
        "--killed-from",
        help="With --combine: draw components only from the mutants this recorded campaign "
        "JSON killed (e.g. docs/mutate/pong.json).",
    ),
) -> None:
    """Verify semantic mutants of a port; report kill rate per level, survivors, localization."""
    # here, not at the top: scipy's import would slow every other command's start by a second
    from envforge.mutate.campaign import run_campaign
    from envforge.mutate.generate import SAMPLE_ORDERS
    from envforge.mutate.workspace import resolve_target

    if sample_order not in SAMPLE_ORDERS:
        raise BadInput(
            f"--sample-order: expected {' or '.join(SAMPLE_ORDERS)}, got {sample_order!r}"
        )
    spec = resolve_spec(env, ref, spec_path, command="mutate")
    resolved = resolve_target(spec, side, target, port)
    level_list = parse_levels(levels)
    sandbox_choice = choose_sandbox(sandbox)
    options = VerifyOptions(  # every mutant and the differential go through the same door
        seed=seed,
        scale=scale,
        fail_fast=True,  # one mutant, one cause: the first difference kills it
        seed_sweep=parse_seed_sweep(seed_sweep) if seed_sweep is not None else None,
        sandbox=sandbox_choice.kind,
    )
    console = Console(stderr=as_json, width=None if sys.stdout.isatty() else 160)
    console.print(f"[dim]{sandbox_choice.line()}[/dim]")
    parallel = jobs or os.cpu_count() or 1
    if combine:
        _combined(
            resolved,
            level_list,
            options,
            combine,
            max_mutants,
            killed_from,
            seed,
            parallel,
            time_limit,
            as_json,
            out,
        )
    with console.status(f"mutating {spec.name}") as status:

        def progress(done: int, total: int, run: object) -> None:
            status.update(f"mutating {spec.name}: {done}/{total} mutants verified")

        report = run_campaign(
            resolved,
            level_list,
            options,
            limit=max_mutants or None,
            seed=seed,
            parallel=parallel,
            time_limit_s=time_limit,
            only=mutant_ids or None,
            progress=progress,
            differential=not no_differential,
            note=lambda msg: status.update(f"mutating {spec.name}: {msg}"),
            sample_order=sample_order,
        )
    data = report.to_dict()
    if out:
        with open(out, "w") as fh:
            json.dump(data, fh, indent=2)
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        report.render(console)
    # exit 1 when a mutant that is not shown equivalent got through: a verifier weakness
    sys.exit(0 if len(report.killed) == report.non_equivalent else 1)


def _combined(
    resolved: Any,
    levels: list[int],
    verify_options: VerifyOptions,
    k: int,
    count: int,
    killed_from: Path | None,
    seed: int,
    parallel: int,
    time_limit: float,
    as_json: bool,
    out: str | None,
) -> None:
    from envforge.mutate.combine import killed_ids, run_combined

    killed = killed_ids(killed_from) if killed_from is not None else None
    if verify_options.seed_sweep is None:  # the same sweep for every combination
        verify_options = replace(verify_options, seed_sweep=1 << 22)
    report = run_combined(
        resolved, levels, verify_options, k, count or 10, killed, seed, parallel, time_limit
    )
    data = report.to_dict()
    if out:
        Path(out).write_text(json.dumps(data, indent=2))
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        for line in report.lines():
            print(one_line(line))
    sys.exit(0 if report.share == 1.0 else 1)


def register(app: typer.Typer) -> None:
    app.command("mutate")(mutate_command)
