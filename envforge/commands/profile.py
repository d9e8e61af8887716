"""`envforge profile`: where one batched step of a port spends its time, by the port's lines."""

from __future__ import annotations

import json
import sys

import typer
from rich.console import Console

from envforge.commands import options
from envforge.errors import BadInput
from envforge.resolve import chosen_port, resolve_spec
from envforge.sandbox.select import choose_sandbox, open_sandbox
from envforge.spec import bounds
from envforge.targets import default_target, get_target, target_names


def profile_command(
    env: options.EnvOrRef = None,
    ref: options.Ref = None,
    spec_path: options.Spec = None,
    target: options.Target = default_target(),
    port: options.CandidatePort = None,
    batch: int = typer.Option(
        1024, "--batch", callback=bounds.option(bounds.AT_LEAST_ONE), help="Envs per step."
    ),
    top: int = typer.Option(
        15, "--top", callback=bounds.option(bounds.AT_LEAST_ONE), help="Lines in the table."
    ),
    include_reset: bool = typer.Option(
        False,
        "--include-reset",
        help="Weigh reset too: JAX profiles the bench loop's step (step, reset of every env, "
        "where(done), observe); Rust adds a row timing a whole batch's reset per loop step.",
    ),
    as_json: options.Json = False,
    sandbox: options.Sandbox = "auto",
) -> None:
    """Profile a port's batched step: JAX by source line (cost, loops, selects); Rust by
    EnvBatch method and by function (perf where the machine has it; the output says), stepped
    with envforge bench's own Rust loop."""
    kind = get_target(target)
    if kind.profile is None:
        have = [t for t in target_names() if get_target(t).profile is not None]
        raise BadInput(
            f"--target: no profiler for {kind.title} ports yet (have: {', '.join(have)})"
        )
    spec = resolve_spec(env, ref, spec_path, command="profile")
    path = chosen_port(spec, port, target)
    console = Console(stderr=as_json, width=None if sys.stdout.isatty() else 160)
    choice = choose_sandbox(sandbox)
    opened = open_sandbox(choice.kind)
    console.print(choice.line(opened), highlight=False)
    with console.status(f"profiling {path} at batch {batch}"):
        profile = kind.load_code("profile")(spec, path, batch, opened, include_reset)
    if as_json:
        print(json.dumps(profile, indent=2))
    else:
        kind.load_code("profile_render")(profile, console, top)


def register(app: typer.Typer) -> None:
    app.command("profile")(profile_command)
