"""`envforge init`: draft a spec (env.toml + README stub) from the reference itself."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from envforge.errors import BadInput
from envforge.spec import EnvSpec, bounds, installed_class_module
from envforge.untrusted.input_files import parse_toml
from envforge.untrusted.shown import indented, one_line, shown


def env_name(reference: str) -> str:
    """``gymnasium:CartPole-v1`` -> ``cartpole``; ``envs/grid.py:GridEnv`` -> ``gridenv``;
    ``envs/pong.c`` -> ``pong``."""
    tail = Path(reference).stem if reference.endswith(".c") else reference.rsplit(":", 1)[-1]
    if reference.startswith("pettingzoo:"):  # pettingzoo.classic.tictactoe_v3 -> tictactoe
        tail = re.sub(r"_v\d+$", "", tail.rsplit(".", 1)[-1])
    tail = re.sub(r"-v\d+$", "", tail)
    return re.sub(r"[^a-z0-9_]+", "_", tail.lower()).strip("_") or "env"


def _written_reference(ref: str, out: Path) -> str:
    """The reference as the spec in ``out`` names it (a file path relative to ``out``)."""
    if ref.startswith(("gymnasium:", "pettingzoo:")) or installed_class_module(ref) is not None:
        return ref  # an id, or a class of an installed module: the same from anywhere
    if ref.endswith(".c"):
        if not Path(ref).is_file():
            raise BadInput(f"reference file not found: {ref}")
        return os.path.relpath(Path(ref).resolve(), out.resolve())
    path, sep, cls = ref.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise BadInput(
            "--ref: expected gymnasium:<id>, gymnasium:<module>:<id>, pettingzoo:<module>, "
            f"path/to/file.py:Class, pkg.module:Class or path/to/env.c, got {ref!r}"
        )
    if not Path(path).is_file():
        raise BadInput(f"reference file not found: {path}")
    return f"{os.path.relpath(Path(path).resolve(), out.resolve())}:{cls}"


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["map_name=8x8", "is_slippery=true"]`` -> ``{"map_name": "8x8", "is_slippery": True}``
    (values read as TOML, else as a string)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise BadInput(f"--option: expected key=value, got {pair!r}")
        try:
            value = parse_toml(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        options[key.strip()] = value
    return options


@dataclass
class InitOutcome:
    env: str
    out: Path
    draft: Any
    written: bool
    assisted: Any = None
    cost: Decimal = Decimal(0)


def run_init(
    ref: str,
    out: Path | None = None,
    name: str | None = None,
    force: bool = False,
    options: dict[str, Any] | None = None,
    episodes: int = 8,
    model: str | None = None,
    budget_usd: float = 0.5,
    ledger: Path | None = None,
    job: str | None = None,
) -> InitOutcome:
    """Draft, self-check and (if it passes, or with ``force``) write ``out/env.toml``."""
    from envforge.agents.select import open_model
    from envforge.init.assist import assist_with_model
    from envforge.init.c_draft import draft_c_spec
    from envforge.init.draft import draft_spec
    from envforge.init.render import render_readme, render_toml
    from envforge.init.selfcheck import SelfCheckConfig, self_check
    from envforge.init.selfcheck_cache import remember

    env = name or env_name(ref)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", env):
        raise BadInput(f"--name: expected a plain name (letters, digits, _ -), got {env!r}")
    bounds.check("--episodes", episodes, bounds.AT_LEAST_ONE)
    bounds.check("--budget-usd", budget_usd, bounds.USD)  # nan passed a plain `<= 0` test
    out = out or Path("references") / env
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} is a file; give a directory")
    if (out / "env.toml").exists() and not force:
        raise BadInput(f"{out / 'env.toml'} exists; pass --force to overwrite it")
    options = options or {}
    # an unknown model or a missing key is bad input before any drafting
    live_model = open_model(model) if model is not None else None
    reference = _written_reference(ref, out)
    # the draft's reference path is relative to out, which must exist for it to resolve
    made_out = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    assisted, cost = None, Decimal(0)
    try:
        with console.status(f"drafting {env}") as status:
            config = SelfCheckConfig(episodes=episodes)
            if reference.startswith("pettingzoo:"):
                from envforge.init.seats_draft import draft_seat_spec

                draft = draft_seat_spec(reference, env, out.resolve(), options)
                status.update(f"drafting {env}: self-check")
                draft.check = self_check(draft.spec(), config)
            elif reference.endswith(".c"):
                draft = draft_c_spec(reference, env, out.resolve())
                status.update(f"drafting {env}: self-check")
                draft.check = self_check(draft.spec(), config)
            else:
                draft = draft_spec(
                    reference,
                    env,
                    out.resolve(),
                    config,
                    progress=lambda msg: status.update(f"drafting {env}: {msg}"),
                    options=options,
                )
            if live_model is not None and draft.check is not None and draft.check.passed:
                status.update(f"drafting {env}: asking {model} for events and policies")
                assisted, cost = assist_with_model(
                    draft, live_model, model or "", Decimal(str(budget_usd)), ledger, job
                )
                known = {e["name"] for e in draft.events}
                draft.events += [e for e in assisted.events if e["name"] not in known]
                draft.policies = assisted.policies
                status.update(f"drafting {env}: self-check with the proposed policies")
                draft.check = self_check(draft.spec(), config)
    finally:
        if made_out and not any(out.iterdir()):
            out.rmdir()
    check = draft.check
    assert check is not None
    written = check.passed or force
    if written:
        out.mkdir(parents=True, exist_ok=True)
        (out / "env.toml").write_text(render_toml(draft))
        if not (out / "README.md").exists():
            (out / "README.md").write_text(render_readme(draft))
        if check.passed:
            remember(out / "env.toml", check)
    return InitOutcome(env, out, draft, written, assisted, cost)


def spec_or_init(ref: str, spec_path: str | None, init: bool) -> EnvSpec:
    """The spec for ``--ref``; with ``init``, one drafted by ``envforge init`` when none exists
    (it must pass the self-check: exit 1 otherwise)."""
    from envforge.spec import load_spec, spec_for_reference

    try:
        return spec_for_reference(ref, spec_path)
    except BadInput:
        if not init or spec_path:
            raise
    outcome = run_init(ref)
    check = outcome.draft.check
    console = Console(stderr=True)
    console.print(shown(check.summary()))
    if not outcome.written:
        for finding in check.findings:
            console.print(shown(f"  {indented(finding.message)}"))
        console.print("no spec written: run envforge init --force and complete it by hand")
        sys.exit(1)
    console.print(f"drafted {outcome.out / 'env.toml'}: review it (docs/SPEC.md)")
    return load_spec(outcome.out / "env.toml")


def init_command(
    ref: str = typer.Option(
        ...,
        "--ref",
        help="Reference to draft a spec for: gymnasium:<id>, gymnasium:<module>:<id>, file.py:Class, pkg.module:Class, env.c.",
    ),
    out: Path = typer.Option(
        None, "--out", help="Directory for env.toml and README.md (default references/<env>/)."
    ),
    name: str = typer.Option(None, "--name", help="Env name (default: from the reference)."),
    force: bool = typer.Option(
        False, "--force", help="Write even if the self-check fails or env.toml exists."
    ),
    option: list[str] = typer.Option(
        None,
        "--option",
        help="key=value for the reference's constructor (gymnasium.make), e.g. is_rainy=true; "
        "repeatable.",
    ),
    episodes: int = typer.Option(
        8,
        "--episodes",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Self-check episodes per policy.",
    ),
    model: str = typer.Option(
        None,
        "--model",
        help="Also ask this model (claude-…, gemini-…, openai:<name>, replay:<cassette>) for "
        "events and scripted policies; the reference keeps only those that run on it.",
    ),
    budget_usd: float = typer.Option(
        0.5,
        "--budget-usd",
        callback=bounds.option(bounds.USD),
        help="Most --model may spend (USD).",
    ),
    ledger: Path = typer.Option(
        None, "--ledger", help="Cost ledger (default $ENVFORGE_LEDGER or .envforge/ledger.sqlite)."
    ),
    job: str = typer.Option(None, "--job", help="Ledger job name for the --model call."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Draft env.toml from the reference and prove its canonical state complete (self-check).

    Exit 0 written and self-check passed, 1 self-check failed (written only with --force),
    2 bad input.
    """
    outcome = run_init(
        ref, out, name, force, parse_options(option or []), episodes, model, budget_usd, ledger, job
    )
    env, out, draft, written = outcome.env, outcome.out, outcome.draft, outcome.written
    assisted, cost, check = outcome.assisted, outcome.cost, outcome.draft.check
    if as_json:
        summary = {
            "env": env,
            "out": str(out),
            "written": written,
            "fields": [f.name for f in draft.fields],
            "left_out": [name for name, _ in draft.left_out],
            "self_check": check.to_dict(),
        }
        if assisted is not None:
            summary["model"] = {
                "events": [e["name"] for e in assisted.events],
                "policies": [p["name"] for p in assisted.policies],
                "rejected": [{"name": n, "why": why} for n, why in assisted.rejected],
                "cost_usd": str(cost),
            }
        print(json.dumps(summary, indent=2))
    else:
        show = Console()
        # field names come from the reference, event names and reasons from the model
        show.print(shown(one_line(f"fields: {', '.join(f.name for f in draft.fields)}")))
        if draft.left_out:
            show.print(shown(one_line(f"left out: {', '.join(n for n, _ in draft.left_out)}")))
        if assisted is not None:
            kept = [e["name"] for e in assisted.events] + [p["name"] for p in assisted.policies]
            show.print(
                shown(one_line(f"{model} (${cost:.4f}): kept {', '.join(kept) or 'nothing'}"))
            )
            for name, why in assisted.rejected:
                show.print(shown(f"  refused {one_line(name)}: {indented(why)}"))
        show.print(shown(check.summary()))
        for finding in check.findings:
            show.print(shown(f"  {indented(finding.message)}"))
        if written:
            show.print(f"wrote {out / 'env.toml'}: review every line marked GUESS or observed")
        else:
            show.print(
                "not written: the canonical state is incomplete (pass --force to write it "
                "anyway and fix it by hand)"
            )
    sys.exit(0 if check.passed else 1)


def register(app: typer.Typer) -> None:
    app.command("init")(init_command)
