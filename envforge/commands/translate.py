"""`envforge translate`: a coding agent ports a reference, the verifier repairs it to equivalence."""

from __future__ import annotations

import json
import logging
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table
from rich.text import Text

from envforge.agents.loop import AgentLimits
from envforge.agents.select import ModelOptions
from envforge.backends.reference_check import build_reference, check_reference
from envforge.commands import options
from envforge.commands.init import spec_or_init
from envforge.commands.translate_view import RunView
from envforge.cost.prices import price_from_options
from envforge.errors import BadInput
from envforge.resolve import resolve_spec
from envforge.sandbox.select import choose_sandbox, open_sandbox
from envforge.spec import bounds
from envforge.targets import default_target
from envforge.translate.job import TranslateJob, TranslateOutcome, run_translate_job
from envforge.translate.orchestrate import RepairConfig
from envforge.translate.preflight import check_translate
from envforge.translate.progress import RunState
from envforge.translate.provenance import time_cell
from envforge.untrusted.shown import indented, one_line, shown
from envforge.verify.context import VerifyOptions
from envforge.verify.levels import DEFAULT_LEVELS, parse_levels


def _budget(text: str) -> Decimal | None:
    if text.lower() in ("none", "inf", "unlimited"):
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise BadInput(f"--budget-usd: expected a number of dollars, got {text!r}") from None
    return bounds.check("--budget-usd", value, bounds.USD)


def translate_command(
    ref: str = typer.Option(..., "--ref", help=options.REF_HELP),
    target: options.Target = default_target(),
    model: str = typer.Option(
        "claude-sonnet-4-6",
        "--model",
        help="claude-…, gemini-…, openai:<name>, replay:<cassette.jsonl> or "
        "scripted:<script.json>.",
    ),
    budget_usd: str = typer.Option(
        "2", "--budget-usd", help="Most this job may spend (USD); 'none' for no limit."
    ),
    max_iters: int = typer.Option(
        20,
        "--max-iters",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Agent episodes: the translation plus repairs.",
    ),
    max_steps: int = typer.Option(
        40,
        "--max-steps",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Model calls per episode.",
    ),
    max_tokens: int = typer.Option(
        16000,
        "--max-tokens",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Output tokens per model call.",
    ),
    max_minutes: float = typer.Option(
        None,
        "--max-minutes",
        callback=bounds.option(bounds.MINUTES),
        help="Wall-clock limit of the whole run; an episode may use what is left of it "
        "(provider latency and retry waits count; the waits are reported apart).",
    ),
    episode_minutes: float = typer.Option(
        None,
        "--episode-minutes",
        callback=bounds.option(bounds.MINUTES),
        help="Wall-clock limit of one agent episode (default: none of its own, only "
        "--max-minutes).",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        callback=bounds.text_option(),
        help="Where the final port lands (default generated/<env>/<target>-agent).",
    ),
    workspace: Path = typer.Option(
        None,
        "--workspace",
        callback=bounds.text_option(),
        help="Agent workspace (default .envforge/runs/<run>).",
    ),
    spec: options.Spec = None,
    levels: options.Levels = DEFAULT_LEVELS,
    l4: bool = typer.Option(
        False, "--l4", help="Also require L4 policy transfer (after L0–L3 pass)."
    ),
    scale: options.Scale = 1.0,
    seed: options.Seed = 0,
    job: str = typer.Option(
        None,
        "--job",
        callback=bounds.text_option(),
        help="Ledger job name; reuse it to share a budget across runs.",
    ),
    ledger: Path = typer.Option(
        None, "--ledger", help="Cost ledger (default $ENVFORGE_LEDGER or .envforge/ledger.sqlite)."
    ),
    price_in: float = typer.Option(
        None,
        "--price-in",
        callback=bounds.option(bounds.USD_PER_MTOK),
        help="USD per million input tokens (for models without a listed price).",
    ),
    price_out: float = typer.Option(
        None,
        "--price-out",
        callback=bounds.option(bounds.USD_PER_MTOK),
        help="USD per million output tokens.",
    ),
    price_cache_read: float = typer.Option(
        None,
        "--price-cache-read",
        callback=bounds.option(bounds.USD_PER_MTOK),
        help="USD per million cached input tokens (default: --price-in).",
    ),
    price_cache_write: float = typer.Option(
        None,
        "--price-cache-write",
        callback=bounds.option(bounds.USD_PER_MTOK),
        help="USD per million cache-write tokens (default: --price-in).",
    ),
    optimize: int = typer.Option(
        0,
        "--optimize",
        callback=bounds.option(bounds.NON_NEGATIVE),
        help="Speed-up episodes after the port verifies (JAX).",
    ),
    record: Path = typer.Option(
        None, "--record", help="Record every model call to this cassette (JSONL)."
    ),
    sandbox: options.Sandbox = "auto",
    init: options.Init = False,
    as_json: options.Json = False,
) -> None:
    """Port a reference with a coding agent and repair it until the verifier passes it.

    Exit 0 verified, 1 not verified (limits, budget, provider failure), 2 bad input.
    """
    env_spec = resolve_spec(None, ref, spec, from_ref=lambda r, s: spec_or_init(r, s, init))
    check_reference(env_spec)  # before any model call: a broken reference fails every verify
    sandbox_choice = choose_sandbox(sandbox)
    required = tuple(lv for lv in parse_levels(levels) if lv < 4)
    if not required:
        raise BadInput("--levels: give some of levels 0-3 (use --l4 to add transfer)")
    check_translate(env_spec, target, transfer=l4 or 4 in parse_levels(levels))
    config = RepairConfig(
        target=target,
        levels=required,
        transfer=l4 or 4 in parse_levels(levels),
        max_iters=max_iters,
        max_wall_s=None if max_minutes is None else max_minutes * 60,
        agent=AgentLimits(
            max_steps=max_steps,
            max_tokens=max_tokens,
            max_wall_s=None if episode_minutes is None else episode_minutes * 60,
        ),
        verify=VerifyOptions(seed=seed, scale=scale, sandbox=sandbox_choice.kind),
        optimize_rounds=optimize,
    )
    translate_job = TranslateJob(
        spec=env_spec,
        model=model,
        config=config,
        budget_usd=_budget(budget_usd),
        out=out or Path("generated") / env_spec.name / f"{target}-agent",
        workspace=workspace,
        job=job,
        ledger=ledger,
        price=price_from_options(price_in, price_out, price_cache_read, price_cache_write),
        model_options=ModelOptions(record_to=record),
    )
    # last of the checks, as the slowest (seconds): no model is paid to port a reference
    # that does not build
    build_reference(env_spec)
    console = Console(stderr=True)
    _show_retries(console)
    # agent commands always run sandboxed: "none" only turns it off for verification
    commands = open_sandbox("process" if sandbox_choice.kind == "none" else sandbox_choice.kind)
    sandbox_line = sandbox_choice.line(commands)
    if not as_json:  # stdout: stderr stays one line when the run fails on bad input
        Console().print(f"[dim]{sandbox_line}[/dim]")
    state = RunState()
    title = f"translating {env_spec.name} to {target} with {model}"
    # the view goes to stdout, or to stderr when stdout carries --json
    with RunView(state, title, console if as_json else Console()) as view:
        outcome = run_translate_job(
            translate_job, sandbox=commands, progress=view.progress, state=state
        )
    if as_json:
        print(json.dumps({**outcome.to_dict(), "sandbox": sandbox_line}, indent=2))
    else:
        show(outcome, Console())
    sys.exit(0 if outcome.result.verified else 1)


def _show_retries(console: Console) -> None:
    """Provider retries (rate limits, overload) appear above the live status line."""
    logger = logging.getLogger("envforge.agents")
    if not logger.handlers:
        handler = RichHandler(console=console, show_time=False, show_path=False)
        handler.addFilter(_visible_record)  # a provider's error text is shown, not obeyed
        logger.addHandler(handler)
        logger.propagate = False


def _visible_record(record: logging.LogRecord) -> bool:
    record.msg, record.args = one_line(record.getMessage()), None
    return True


def show(outcome: TranslateOutcome, console: Console) -> None:
    result = outcome.result
    table = Table(title=f"envforge translate: {outcome.model}, job {outcome.job}")
    for column in ("#", "kind", "agent", "verdict", "calls", "cost (USD)", "time (s)", "finding"):
        table.add_column(column)
    for it in result.iterations:
        table.add_row(  # the finding and the agent's status quote the port and the model
            str(it.number),
            shown(one_line(it.kind)),
            shown(one_line(it.agent_status)),
            shown(one_line(it.verdict)),
            str(it.calls),
            f"{it.cost_usd:.4f}",
            time_cell(it.wall_s, it.retry_wait_s),
            shown(indented(it.finding, "")),
        )
    console.print(table)
    if result.last_verify:
        console.print("[bold]last verification[/] (as run_verify shows it):")
        # it quotes the port and the reference: indented, so none of its lines reads as ours
        console.print(shown("    " + indented(result.last_verify.rstrip("\n"))))
    color = "green" if result.verified else "red"
    status = Text.assemble((result.status, f"bold {color}"), ": ", shown(indented(result.message)))
    console.print(status)
    console.print(
        f"cost ${outcome.cost_usd:.4f} this run, ${outcome.job_spent_usd:.4f} for job "
        f"{outcome.job} ({outcome.calls} calls, price table {outcome.price.version})"
    )
    console.print(shown(f"workspace: {one_line(result.workspace)}"))
    if outcome.out is not None:
        console.print(shown(f"port: {one_line(outcome.out)} (with PROVENANCE.md)"))


def register(app: typer.Typer) -> None:
    app.command("translate")(translate_command)
