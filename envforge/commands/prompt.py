"""`envforge prompt`: a workspace for a coding agent envforge does not run (Claude Code, Gemini
CLI, Codex CLI): the reference, the spec, the task as AGENTS.md / CLAUDE.md / GEMINI.md and
a ./verify entry point."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from envforge.commands import options
from envforge.errors import BadInput
from envforge.resolve import resolve_spec
from envforge.spec import bounds
from envforge.targets import default_target
from envforge.translate.preflight import check_translate
from envforge.verify.levels import DEFAULT_LEVELS, parse_levels
from envforge.workspace.optimize_workspace import (
    BENCH_SCRIPT,
    PROFILE_SCRIPT,
    write_optimize_workspace,
)
from envforge.workspace.write import TASK_FILES, VERIFY_SCRIPT, write_workspace


def prompt_command(
    env: options.EnvOrRef = None,
    ref: options.Ref = None,
    spec: options.Spec = None,
    target: options.Target = default_target(),
    out: Path = typer.Option(
        None,
        "--out",
        callback=bounds.text_option(),
        help="Workspace folder (default ./envforge-<env>-<target>).",
    ),
    levels: options.Levels = DEFAULT_LEVELS,
    optimize: bool = typer.Option(
        False,
        "--optimize",
        help="The task is to make a verified port faster: port/ starts as the shipped port "
        "(or --port), with ./bench and ./profile beside ./verify.",
    ),
    port: options.CandidatePort = None,
    as_json: options.Json = False,
) -> None:
    """Write a workspace with the porting task for your own coding agent, and a ./verify."""
    env_spec = resolve_spec(env, ref, spec, command="prompt")
    wanted = parse_levels(levels)
    if not wanted or max(wanted) > 3:
        raise BadInput("--levels: give some of levels 0-3")
    if port is not None and not optimize:
        raise BadInput("--port: only with --optimize (the port to make faster)")
    check_translate(env_spec, target)  # ./verify will need the same tools
    folder = out or Path(f"envforge-{env_spec.name}-{target}" + ("-optimize" if optimize else ""))
    if optimize:
        config = write_optimize_workspace(env_spec, target, folder, levels, port)
    else:
        config = write_workspace(env_spec, target, folder, levels)
    scripts = [VERIFY_SCRIPT, *((BENCH_SCRIPT, PROFILE_SCRIPT) if optimize else ())]
    if as_json:
        written = [*TASK_FILES, *scripts, "reference/", "port/"]
        print(json.dumps({"workspace": str(config.root), "files": written, "port": config.port}))
        return
    console = Console()
    console.print(f"workspace: {config.root}")
    shown = "; ".join(f"./{name}" for name in scripts)
    console.print(f"  task: {', '.join(TASK_FILES)}; reference/; port/; {shown}")
    console.print(
        f"next: cd {folder} and start your agent (claude, gemini or codex) there; "
        "it reads the task and runs ./verify (docs/AGENTS.md)"
    )


def register(app: typer.Typer) -> None:
    app.command("prompt")(prompt_command)
