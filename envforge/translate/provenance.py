"""PROVENANCE.md: how a port was made (by which model, in how many iterations, at what cost)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from envforge import __version__
from envforge.agents.messages import Usage
from envforge.spec import EnvSpec
from envforge.translate.made_by import front_matter
from envforge.translate.orchestrate import RepairConfig, RepairResult


@dataclass(frozen=True)
class RunIdentity:
    model: str
    job: str
    run: str
    price_version: str


def provenance_markdown(
    spec: EnvSpec,
    result: RepairResult,
    config: RepairConfig,
    identity: RunIdentity,
    now: datetime | None = None,
) -> str:
    now = now or datetime.now(UTC)
    usage = sum((it.usage for it in result.iterations), Usage())
    cost = sum((it.cost_usd for it in result.iterations), Decimal(0))
    calls = sum(it.calls for it in result.iterations)
    passed = ", ".join(f"L{lv}" for lv in result.levels_passed) or "none"
    verdict = "verified" if result.verified else f"NOT VERIFIED ({result.status}: {result.message})"
    options = config.verify
    lines = [
        front_matter("agent").rstrip("\n"),
        f"# Provenance: {spec.name} ({config.target} port)",
        "",
        f"Written by a coding agent through `envforge translate` (envforge {__version__}) and "
        "checked by the envforge verifier.",
        "",
        "| | |",
        "|---|---|",
        f"| reference | `{spec.reference}` |",
        f"| verdict | {verdict} |",
        f"| levels required | {config.levels_text} |",
        f"| levels passed | {passed} |",
        f"| model | `{identity.model}` |",
        f"| iterations | {len(result.iterations)} |",
        f"| model calls | {calls} |",
        f"| tokens | input {usage.input_tokens}, output {usage.output_tokens}, "
        f"cache read {usage.cache_read_tokens}, cache write {usage.cache_write_tokens} |",
        f"| cost | ${cost} (price table {identity.price_version}) |",
        f"| verifier | seed {options.seed}, scale {options.scale} |",
        f"| job / run | `{identity.job}` / `{identity.run}` |",
        f"| date | {now.strftime('%Y-%m-%d %H:%M UTC')} |",
        "",
        "## Iterations",
        "",
        "| # | kind | agent | steps | verdict | calls | cost (USD) | time (s) | "
        "finding repaired next |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for it in result.iterations:
        finding = it.finding.replace("|", "\\|") or "—"
        lines.append(
            f"| {it.number} | {it.kind} | {it.agent_status} | {it.steps} | {it.verdict} | "
            f"{it.calls} | {it.cost_usd} | {time_cell(it.wall_s, it.retry_wait_s)} | {finding} |"
        )
    if result.last_verify:
        lines += ["", "## Last verification", "", "As `run_verify` shows it:", ""]
        lines += fenced(result.last_verify)
    lines += ["", f"Per-iteration snapshots, reports and transcripts: `{result.workspace}`.", ""]
    return "\n".join(lines)


def time_cell(wall_s: float, retry_wait_s: float) -> str:
    """``312`` or ``312 (40 waiting on retries)``."""
    waited = f" ({retry_wait_s:.0f} waiting on retries)" if retry_wait_s >= 0.5 else ""
    return f"{wall_s:.0f}{waited}"


def fenced(text: str) -> list[str]:
    """``text`` in a code fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *text.rstrip("\n").splitlines(), fence]
