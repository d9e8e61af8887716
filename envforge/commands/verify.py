"""`envforge verify`: is this port the same environment as its reference?"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console

from envforge.backends.reference_check import check_reference, first_line
from envforge.commands import options
from envforge.commands.init import spec_or_init
from envforge.errors import BadInput, BrokenReference, DriverFailure
from envforge.init.selfcheck_cache import cached_or_run
from envforge.prompts import render as prompts
from envforge.resolve import resolve_port, resolve_spec
from envforge.sandbox.select import choose_sandbox
from envforge.spec import EnvSpec, bounds
from envforge.targets import default_target
from envforge.untrusted.shown import indented, shown, visible
from envforge.verify.context import VerifyOptions
from envforge.verify.levels import DEFAULT_LEVELS, parse_levels
from envforge.verify.runner import parse_seed_sweep, verify
from envforge.workspace.next_prompt import PACKAGE_ROOT, next_repair_prompt
from envforge.workspace.pinned import load_pin, shown_in_workspace
from envforge.workspace.write import load_config


def verify_command(
    env: options.EnvOrRef = None,
    ref: options.Ref = None,
    port: options.Port = None,
    spec: options.Spec = None,
    target: options.Target = default_target(),
    levels: options.Levels = DEFAULT_LEVELS,
    all_levels: bool = typer.Option(
        False, "--all-levels", help="Run every level even after a failure."
    ),
    fail_fast: bool = typer.Option(
        False,
        "--fail-fast",
        help="Stop at the first difference (by default every distinct cause is searched for "
        "and listed, one group each).",
    ),
    seed: options.Seed = 0,
    scale: options.Scale = 1.0,
    strict: bool = typer.Option(
        None, "--strict/--fast", help="Strict float (no FMA) or fast mode; default from spec."
    ),
    timeout: float = typer.Option(
        None,
        "--timeout",
        callback=bounds.option(bounds.SECONDS),
        help="Seconds one driver call may take, the port's import included "
        "(default: the spec's [verify] timeout_s, 120).",
    ),
    build_timeout: float = typer.Option(
        None,
        "--build-timeout",
        callback=bounds.option(bounds.SECONDS),
        help="Seconds compiling a driver may take: a Rust port's cargo build, JAX's own import, "
        "building the reference (default 600). Every reply is also read whole within its "
        "limit and refused beyond a size cap.",
    ),
    no_isolate: bool = typer.Option(
        False, "--no-isolate", help="Run drivers in this process (debugging)."
    ),
    both_directions: bool = typer.Option(
        False, "--both-directions", help="L4: also train on the reference."
    ),
    sandbox: options.Sandbox = "auto",
    seed_sweep: options.SeedSweep = None,
    self_check: bool = typer.Option(
        True,
        "--self-check/--no-self-check",
        help="Check first that the spec's canonical state is complete (once per spec content).",
    ),
    coverage: bool = typer.Option(
        None,
        "--coverage/--no-coverage",
        help="Report which reference lines (C: and branches) L1-L3 executed "
        "(default: for C references; costs a gymnasium verify ~13% CPU).",
    ),
    init: options.Init = False,
    as_json: options.Json = False,
    html_path: Path = typer.Option(
        None,
        "--html",
        help="Also write every group of the run to this self-contained HTML page (no network: "
        "plots are inline SVG).",
    ),
    repair_prompt: bool = typer.Option(
        False,
        "--repair-prompt",
        help="Then print the next repair prompt for a coding agent (the report goes to stderr).",
    ),
    verify_as: str = typer.Option(
        None,
        "--verify-as",
        hidden=True,
        help="How the repair prompt tells the agent to rerun the verifier; {levels} marks them.",
    ),
    workspace: Path = typer.Option(
        None,
        "--workspace",
        help="A workspace written by envforge prompt (what its ./verify runs): its port/ "
        "against the real reference envforge recorded for it; an edited reference/ is refused.",
    ),
) -> None:
    """Verify a port against its reference, level by level. Exit 0 equivalent, 1 not, 2 bad input."""
    pin = None
    if workspace is not None:
        if env or ref or spec or port:
            raise BadInput("--workspace names the env, reference, spec and port: give none of them")
        config = load_config(workspace)  # the record outside it, the copy checked unedited
        pin = load_pin(config.root)
        env_spec = config.load_spec()
        verify_as = verify_as or "./verify {levels}"
    else:
        env_spec = resolve_spec(env, ref, spec, from_ref=lambda r, s: spec_or_init(r, s, init))
    check_reference(env_spec)  # a broken reference is refused before any self-check or build
    port_path = str(config.port_path() if pin else resolve_port(env_spec, port, target))
    sandbox_choice = choose_sandbox(sandbox)
    options = VerifyOptions(
        seed=seed,
        all_levels=all_levels,
        fail_fast=fail_fast,
        scale=scale,
        isolate=not no_isolate,
        timeout_s=timeout,
        build_timeout_s=build_timeout,
        strict_float=strict,
        both_directions=both_directions,
        sandbox=sandbox_choice.kind,
        seed_sweep=parse_seed_sweep(seed_sweep) if seed_sweep is not None else None,
        coverage=coverage,
    )
    level_list = parse_levels(levels)
    # on bad input stderr carries exactly one line: the sandbox line goes to stdout when the
    # report does, else into the JSON
    console = Console(stderr=as_json or repair_prompt)
    if self_check:
        _spec_self_check(env_spec, console, as_json)
    if not (as_json or repair_prompt):
        console.print(f"[dim]{sandbox_choice.line()}[/dim]")
    with console.status(f"verifying {env_spec.name}") as status:
        report = verify(
            env_spec,
            port_path,
            level_list,
            options,
            progress=lambda msg: status.update(f"verifying {env_spec.name}: {msg}"),
        )
    if as_json:
        report_json = {**report.to_dict(), "sandbox": sandbox_choice.line()}
        print(json.dumps(report_json, indent=2), file=sys.stderr if repair_prompt else None)
    if html_path is not None:
        from envforge.verify.html_report import render_html

        try:
            html_path.write_text(render_html(report))
        except OSError as exc:
            raise BadInput(f"--html {html_path}: {exc.strerror or exc}") from None
    if report.reference_error is not None:  # no verdict about the port: bad input, exit 2
        raise BrokenReference(report.reference_error)
    if not as_json:
        report.render(console)
    if repair_prompt:
        rerun = verify_as or rerun_command(env, ref, spec, port, target)
        roots = [env_spec.root.parent.parent, PACKAGE_ROOT]
        if pin is None:
            text = next_repair_prompt(
                report, env_spec, Path(port_path), levels, rerun, [Path.cwd(), *roots]
            )
        else:  # the reference's lines named as the agent finds them, in its reference/
            text = next_repair_prompt(
                report, env_spec, Path(port_path), levels, rerun, [pin.root], follow_port=False
            )
            text = prompts.scrub_paths(shown_in_workspace(text, pin), roots)
        print(visible(text), end="")  # it quotes the port, and may land on a terminal
    sys.exit(report.exit_code)


def rerun_command(
    env: str | None, ref: str | None, spec: str | None, port: str | None, target: str
) -> str:
    """This verify command again, with ``{levels}`` where its levels go."""
    parts = ["envforge", "verify", *([env] if env else [])]
    for flag, value in (("--ref", ref), ("--spec", spec), ("--port", port)):
        if value:
            parts += [flag, value]
    if not port and target != default_target():
        parts += ["--target", target]
    return " ".join(shlex.quote(p) for p in parts) + " --levels {levels}"


def _spec_self_check(env_spec: EnvSpec, console: Console, as_json: bool) -> None:
    """A new or changed spec is first checked against its own reference (exit 1 if it fails)."""
    try:
        with console.status(f"self-check of the {env_spec.name} spec"):
            outcome = cached_or_run(env_spec)
    except DriverFailure as e:  # the reference itself failed (a compile error): not the spec
        if e.side != "reference":
            raise
        raise BrokenReference(
            f"the reference failed in {e.call}: {first_line(e.message)}"
        ) from None
    if outcome is None:
        return
    verdict, cached = outcome
    if verdict["passed"]:
        if not cached:
            console.print(f"[dim]spec self-check passed ({verdict['wall_s']:.1f} s)[/dim]")
        return
    if as_json:
        print(json.dumps({"env": env_spec.name, "self_check": verdict}, indent=2))
    console.print(
        f"[bold red]spec self-check failed[/]: the canonical state of {env_spec.name} is not the "
        "reference's whole state, so no port can be verified against it (--no-self-check skips)"
    )
    for finding in verdict["findings"]:
        console.print(shown("  " + indented(finding["message"])))
    sys.exit(1)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
