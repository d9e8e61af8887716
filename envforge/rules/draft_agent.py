"""Drafting versions of a reference through envforge's own agent loop (``rules draft
--model M --versions N``): the same providers, ledger and budget as ``translate``.

Each version is drafted in its own workspace (``draft_workspace.py``) by a separate episode that
sees only the rules text (and, after the first, the first version's spec). The episode's check
tool runs ``./check`` (the rule cases against the version) in the sandbox; the version is done
when the check passes with no change since. Every call is priced into the ledger under one job,
so the budget covers all versions together.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from envforge.agents.loop import EQUIVALENT, Agent, AgentLimits
from envforge.agents.messages import Model, user
from envforge.agents.select import ModelOptions, open_model, provider_of
from envforge.agents.tools import WorkspaceTools
from envforge.cost.budget import Budget
from envforge.cost.ledger import Ledger
from envforge.cost.meter import MeteredModel
from envforge.cost.prices import load_price_table
from envforge.rules.draft_workspace import CHECK, TASK_FILES, class_name, write_draft_workspace
from envforge.rules.text import RulesText
from envforge.sandbox.base import Sandbox
from envforge.spec import load_spec

SYSTEM = (
    "You write a Python reference implementation of a game from its rules text, in a workspace "
    "with tools to read, write and edit files and to run commands. Follow AGENTS.md exactly. "
    'run_verify (levels "0") runs ./check: your rule cases against your version. You are done '
    "when it passes with no change since."
)


@dataclass
class DraftedVersion:
    folder: Path
    status: str
    checked: bool
    calls: int


@dataclass
class DraftOutcome:
    job: str
    model: str
    versions: list[DraftedVersion] = field(default_factory=list)
    cost_usd: Decimal = Decimal(0)


def check_text(tools: WorkspaceTools) -> str:
    """What run_verify answers: the check's output, headed by a verdict the loop reads."""
    result = tools.sandbox.run(f"./{CHECK}", tools.root)
    ok = result.exit_code == 0
    head = f"{EQUIVALENT} to its rule cases" if ok else "verdict: not done (./check failed)"
    return f"{head}\n{result.describe()}"


def draft_versions(
    rules: RulesText,
    name: str,
    out: Path,
    versions: int,
    model_name: str,
    budget_usd: Decimal | None,
    ledger_path: Path | None = None,
    sandbox: Sandbox | None = None,
    model: Model | None = None,
    limits: AgentLimits | None = None,
) -> DraftOutcome:
    """Draft ``versions`` versions under ``out/v1``, ``out/v2``, ...; v2 on implement v1's
    spec (v1 drafts it with ``envforge init`` in its workspace)."""
    live = model or open_model(model_name, ModelOptions())
    priced = live.name if provider_of(model_name) in ("replay", "scripted") else model_name
    price = load_price_table().price_for(priced)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run = f"rules-{name}-{stamp}-{secrets.token_hex(2)}"
    outcome = DraftOutcome(job=f"rules-draft-{run}", model=priced)
    with Ledger(ledger_path) as ledger:
        metered = MeteredModel(
            live, price, ledger, Budget(budget_usd), outcome.job, run, purpose="rules-draft"
        )
        for number in range(1, versions + 1):
            folder = out / f"v{number}"
            first_spec = out / "v1" / "env.toml"
            spec_path = first_spec if number > 1 and first_spec.is_file() else None
            spec = load_spec(spec_path) if spec_path else None
            write_draft_workspace(rules, name, folder, spec, spec_path)
            tools = WorkspaceTools(folder, verify=lambda _levels: "", sandbox=sandbox, levels="0")
            tools.verify_fn = lambda _levels, t=tools: check_text(t)
            before = metered.calls
            task = (folder / TASK_FILES[0]).read_text()
            result = Agent(metered, tools, limits).run(SYSTEM, user(task))
            checked = check_text(tools).startswith(EQUIVALENT)
            outcome.versions.append(
                DraftedVersion(folder, result.status, checked, metered.calls - before)
            )
        outcome.cost_usd = ledger.spent(job=outcome.job)
    return outcome


__all__ = ["DraftOutcome", "DraftedVersion", "class_name", "draft_versions"]
