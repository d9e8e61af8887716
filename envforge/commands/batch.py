"""`envforge batch run|status|report jobs.toml`: many ports, one budget, resumable."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer
from rich.console import Console

from envforge.backends.reference_check import build_reference
from envforge.batch.batch_report import build_report, show_report, show_status, to_markdown
from envforge.batch.manifest import load_manifest
from envforge.batch.plan import plan_jobs
from envforge.batch.run_batch import RunOptions, run_batch
from envforge.batch.store import open_existing
from envforge.commands import options
from envforge.errors import BadInput
from envforge.sandbox.select import choose_sandbox
from envforge.spec import bounds

batch_app = typer.Typer(
    help="Run many translation jobs from a manifest, with one budget; resumable; local or Ray.",
    no_args_is_help=True,
)

MANIFEST = typer.Argument(..., help="The batch manifest (TOML), e.g. jobs.toml.")


def _stdout() -> Console:
    """Tables on a terminal fit it; piped into a file or CI log they keep every column whole."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


@batch_app.command("run")
def run_command(
    manifest: Path = MANIFEST,
    workers: int = typer.Option(
        None,
        "--workers",
        callback=bounds.option(bounds.WORKERS),
        help="Jobs at once (default: the manifest's).",
    ),
    executor: str = typer.Option(
        None, "--executor", help="local or ray (default: the manifest's, else local)."
    ),
    address: str = typer.Option(
        None, "--address", help="Ray cluster address (default: start a local Ray)."
    ),
    sandbox: options.Sandbox = "auto",
    as_json: bool = typer.Option(False, "--json", help="Print the final report as JSON."),
) -> None:
    """Run every unfinished job; after a crash or kill the same command resumes.

    Exit 0 when every job passed, 1 when some did not, 2 on bad input."""
    if executor not in (None, "local", "ray"):
        raise BadInput(f"--executor: expected local or ray, got {executor!r}")
    loaded = load_manifest(manifest)
    choice = choose_sandbox(sandbox)
    plans = plan_jobs(loaded)  # every job's bad input is refused before a line reaches stderr
    for spec in {plan.spec.model_dump_json(): plan.spec for plan in plans}.values():
        build_reference(spec)  # each distinct reference built once before any model is paid
    Console(stderr=True).print(f"[dim]{choice.line()}[/dim]")
    options = RunOptions(workers=workers, executor=executor, address=address, sandbox=choice.kind)  # type: ignore[arg-type]
    try:
        report = run_batch(loaded, options, plans=plans)
    except KeyboardInterrupt:
        print(
            f"envforge: batch {loaded.name} interrupted; run the same command to resume",
            file=sys.stderr,
            flush=True,
        )
        os._exit(130)  # job threads may still be in a call; the store is safe to leave mid-way
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        show_report(report, _stdout())
    sys.exit(0 if report.all_passed else 1)


@batch_app.command("status")
def status_command(
    manifest: Path = MANIFEST,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Where each job stands (reads the job store; never starts anything)."""
    loaded = load_manifest(manifest)
    store = open_existing(loaded.db_path)
    try:
        report = build_report(loaded, store)
    finally:
        if store is not None:
            store.close()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        show_status(report, _stdout())


@batch_app.command("report")
def report_command(
    manifest: Path = MANIFEST,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table."),
) -> None:
    """The batch's table: state, levels passed, iterations, tokens, cost, wall time, speedup."""
    if as_json and markdown:
        raise BadInput("choose one of --json and --markdown")
    loaded = load_manifest(manifest)
    store = open_existing(loaded.db_path)
    try:
        report = build_report(loaded, store)
    finally:
        if store is not None:
            store.close()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    elif markdown:
        print(to_markdown(report), end="")
    else:
        show_report(report, _stdout())


def register(app: typer.Typer) -> None:
    app.add_typer(batch_app, name="batch")
