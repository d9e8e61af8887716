"""`envforge rules`: from a rules text to a reference (docs/RULES.md).

- ``rules check``: run rule cases (each quoting the rules lines it checks) against the
  reference and, through the sandbox, a port;
- ``rules compare``: verify independently written versions of a reference against each other
  and write each disagreement as a rule question for a person;
- ``rules draft``: a workspace in which a coding agent writes one version from the rules text.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

import typer
from rich.console import Console

from envforge.backends.recipe import open_driver, port_recipe, reference_recipe
from envforge.commands import options
from envforge.errors import BadInput
from envforge.resolve import existing_port, resolve_spec
from envforge.rules.cases import CaseResult, load_cases, run_cases
from envforge.rules.draft_agent import class_name, draft_versions
from envforge.rules.draft_workspace import write_draft_workspace
from envforge.rules.questions import write_questions
from envforge.rules.text import RulesText
from envforge.rules.versions import compare, parse_versions
from envforge.sandbox.driver import open_sandboxed
from envforge.sandbox.select import choose_sandbox, open_sandbox
from envforge.spec import bounds, load_spec
from envforge.untrusted.shown import indented, one_line, shown
from envforge.verify.context import VerifyOptions
from envforge.verify.levels import DEFAULT_LEVELS, parse_levels

app = typer.Typer(help="From a rules text to a reference: rule cases, versions, rule questions.")


def _print_cases(console: Console, side: str, results: list[CaseResult]) -> None:
    passed = sum(r.passed for r in results)
    console.print(f"{side}: {passed}/{len(results)} rule cases pass")
    for r in results:
        if r.finding is not None:
            console.print(shown(f"  FAIL {indented(r.finding.message)}"), soft_wrap=True)


def _check_inputs(rules: str, cases: Path | None, spec: Path | None) -> tuple[Path, Path, Path]:
    """The rules text, cases and spec: an env name stands for its references/<env>/ RULES.md,
    cases.toml and env.toml (--cases, --spec still win); a rules file needs both options."""
    if not Path(rules).exists() and rules.isidentifier():
        folder = resolve_spec(rules, command="rules check").root
        return folder / "RULES.md", cases or folder / "cases.toml", spec or folder / "env.toml"
    if cases is None or spec is None:
        raise BadInput("rules check RULES.md needs --cases and --spec (or name an env)")
    return Path(rules), cases, spec


@app.command("check")
def check_command(
    rules: str = typer.Argument(
        ..., help="The rules text (markdown or plain text), or an env name (references/<env>/)."
    ),
    cases: Path = typer.Option(None, "--cases", help="Rule cases (default: the env's)."),
    spec: Path = typer.Option(None, "--spec", help="The env.toml (default: the env's)."),
    port: options.CheckedPort = None,
    sandbox: options.Sandbox = "auto",
    as_json: options.Json = False,
) -> None:
    """Run rule cases against the reference (and a port). Exit 0 all pass, 1 a case fails."""
    rules_path, cases, spec = _check_inputs(rules, cases, spec)
    text = RulesText.load(rules_path)
    env_spec = load_spec(spec)
    loaded = load_cases(cases, env_spec, text)
    sides: dict[str, list[CaseResult]] = {}
    reference = open_driver(reference_recipe(env_spec), True)
    try:
        sides["reference"] = run_cases(reference, env_spec, loaded, text)
    finally:
        reference.close()
    if port is not None:
        sandboxed = open_sandboxed(
            port_recipe(env_spec, existing_port(port)), open_sandbox(choose_sandbox(sandbox).kind)
        )
        try:
            sides["port"] = run_cases(sandboxed, env_spec, loaded, text, sides["reference"])
        finally:
            sandboxed.close()
    failed = any(not r.passed for results in sides.values() for r in results)
    if as_json:
        out = {
            side: [
                {"case": r.case.name, "rules": r.case.rules, "passed": r.passed}
                | ({"finding": r.finding.to_dict()} if r.finding else {})
                for r in results
            ]
            for side, results in sides.items()
        }
        print(json.dumps(out, indent=2))
    else:
        console = Console()
        for side, results in sides.items():
            _print_cases(console, side, results)
    raise typer.Exit(1 if failed else 0)


@app.command("compare")
def compare_command(
    rules: Path = typer.Argument(..., help="The rules text."),
    versions: list[str] = typer.Argument(..., help="Two versions or more: file.py:Class each."),
    spec: Path = typer.Option(..., "--spec", help="The env.toml every version implements."),
    questions: Path = typer.Option(
        Path("questions.md"), "--questions", help="Where the rule questions go (and .json)."
    ),
    levels: options.Levels = DEFAULT_LEVELS,
    scale: options.Scale = 1.0,
    seed: options.Seed = 0,
    sandbox: options.Sandbox = "auto",
    as_json: options.Json = False,
) -> None:
    """Verify versions of a reference against the first; each disagreement is a rule question.
    Where each runs: version 1 is the reference side and runs on the host, in a child process
    outside any sandbox (as a reference does: give it only code you trust); every other version
    takes the port side and runs in the sandbox --sandbox names. Exit 0 when all agree, 1 when
    there are questions or a later version failed (it is named)."""
    text = RulesText.load(rules)
    env_spec = load_spec(spec)
    wanted = parse_levels(levels)
    if max(wanted) > 3:
        raise BadInput("--levels: versions are compared at levels 0-3")
    parsed = parse_versions(versions)
    options = VerifyOptions(scale=scale, seed=seed, sandbox=choose_sandbox(sandbox).kind)
    result = compare(env_spec, parsed, text, wanted, options)
    write_questions(questions, result.questions, text)
    if as_json:
        print(json.dumps([q.to_dict() for q in result.questions], indent=2))
    else:
        console = Console()
        for label, report in result.reports.items():
            said = f"{one_line(parsed[0].label)} vs {one_line(label)}: {report.verdict}"
            console.print(shown(said), soft_wrap=True)
            if not report.passed:  # a version that breaks the contract is repaired, not asked
                level = next(lv for lv in report.levels if lv.status != "pass")
                summary = shown(f"  L{level.level}: {indented(level.summary)}")
                console.print(summary, soft_wrap=True)
        if result.agree:
            console.print(f"the {len(parsed)} versions agree at levels {levels}")
        else:
            console.print(f"{len(result.questions)} rule question(s) written to {questions}")
    raise typer.Exit(0 if result.agree else 1)


@app.command("draft")
def draft_command(
    rules: Path = typer.Argument(..., help="The rules text."),
    name: str = typer.Option(..., "--name", help="The env's name (a Python identifier)."),
    out: Path = typer.Option(
        None,
        "--out",
        callback=bounds.text_option(),
        help="Workspace folder (default ./envforge-rules-<name>).",
    ),
    spec: Path = typer.Option(
        None,
        "--spec",
        help="An env.toml the version must implement (the first version's, for later ones).",
    ),
    model: str = typer.Option(
        None,
        "--model",
        help="Draft with envforge's agent loop and this model (as translate takes it); "
        "without it, write a workspace for your own agent.",
    ),
    versions: int = typer.Option(
        1, "--versions", min=1, max=5, help="With --model: independent versions, v1..vN."
    ),
    budget_usd: str = typer.Option(
        "2", "--budget-usd", help="With --model: most all versions together may spend (USD)."
    ),
    ledger: Path = typer.Option(None, "--ledger", help="Cost ledger (as translate's)."),
    start: Path = typer.Option(
        None, "--from", help="Repair: start from this version's folder (<name>.py, cases.toml)."
    ),
    questions: Path = typer.Option(
        None, "--questions", help="Repair: the rule questions file of the round that asked."
    ),
) -> None:
    """Draft a version of a reference from the rules text: a workspace for your coding agent,
    or (--model) envforge's own agent loop, --versions times, priced into the ledger."""
    text = RulesText.load(rules)
    if not name.isidentifier():
        raise BadInput(f"--name must be a Python identifier, got {name!r}")
    folder = out or Path(f"envforge-rules-{name}")
    console = Console()
    if model is None:
        if versions != 1:
            raise BadInput("--versions needs --model (without it, draft one workspace per run)")
        written = write_draft_workspace(
            text, name, folder, load_spec(spec) if spec else None, spec, start, questions
        )
        console.print(f"workspace: {written}")
        console.print(
            f"next: cd {folder}, start your agent there; it reads AGENTS.md, runs ./check"
        )
        return
    if spec is not None:
        raise BadInput("--spec with --model: v1 drafts the spec the later versions implement")
    if start is not None or questions is not None:
        raise BadInput("--from/--questions: a repair workspace is for your own agent (no --model)")
    budget = None if budget_usd.strip().lower() == "none" else _usd(budget_usd)
    outcome = draft_versions(text, name, folder, versions, model, budget, ledger)
    for v in outcome.versions:
        state = "rule cases pass" if v.checked else "rule cases do not pass"
        console.print(shown(one_line(f"{v.folder}: {v.status}, {v.calls} model calls, {state}")))
    console.print(f"job {outcome.job}: {outcome.model}, ${outcome.cost_usd}")
    drafted = [v for v in outcome.versions if v.checked]
    if len(drafted) > 1:
        refs = " ".join(f"{v.folder}/{name}.py:{class_name(name)}" for v in drafted)
        console.print(f"next: envforge rules compare {rules} {refs} --spec {folder}/v1/env.toml")
    raise typer.Exit(0 if len(drafted) == len(outcome.versions) else 1)


def _usd(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise BadInput(f"--budget-usd: expected a number of dollars, got {text!r}") from None
    return bounds.check("--budget-usd", value, bounds.USD)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="rules")
