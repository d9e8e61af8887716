"""The batch report: one row per job (state, levels, iterations, tokens, cost, wall time,
speedup) and the totals, from the job store and its ledger; as a rich table, JSON or Markdown."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envforge.agents.messages import Usage
from envforge.batch.manifest import Manifest
from envforge.batch.store import STATES, BatchStore, Spending
from envforge.untrusted.shown import indented, one_line, shown

STATE_COLORS = {
    "passed": "green",
    "failed": "red",
    "error": "red",
    "budget-exhausted": "yellow",
    "running": "cyan",
    "pending": "dim",
}


@dataclass(frozen=True)
class ReportRow:
    job: str
    env: str
    target: str
    model: str
    state: str
    status: str | None
    """The repair loop's status: verified, iteration_limit, time_limit, budget, model_error."""
    message: str | None
    levels_required: str
    levels_passed: tuple[int, ...]
    best_level: int | None
    iterations: int
    attempts: int
    calls: int
    usage: Usage
    cost_usd: Decimal
    wall_s: float
    steps_per_second: float | None
    speedup: float | None
    """Port steps/s over the reference's, when both are known."""
    out: str | None

    def to_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "job": self.job,
            "env": self.env,
            "target": self.target,
            "model": self.model,
            "state": self.state,
            "status": self.status,
            "message": self.message,
            "levels_required": self.levels_required,
            "levels_passed": list(self.levels_passed),
            "best_level": self.best_level,
            "iterations": self.iterations,
            "attempts": self.attempts,
            "calls": self.calls,
            "tokens": {
                "input": u.input_tokens,
                "output": u.output_tokens,
                "cache_read": u.cache_read_tokens,
                "cache_write": u.cache_write_tokens,
            },
            "cost_usd": str(self.cost_usd),
            "wall_s": round(self.wall_s, 3),
            "steps_per_second": self.steps_per_second,
            "speedup": self.speedup,
            "out": self.out,
        }


@dataclass(frozen=True)
class BatchReport:
    name: str
    manifest: str
    total_budget_usd: Decimal
    rows: tuple[ReportRow, ...]

    @property
    def spent_usd(self) -> Decimal:
        return sum((r.cost_usd for r in self.rows), Decimal(0))

    @property
    def usage(self) -> Usage:
        return sum((r.usage for r in self.rows), Usage())

    @property
    def counts(self) -> dict[str, int]:
        return {s: n for s in STATES if (n := sum(r.state == s for r in self.rows))}

    @property
    def all_passed(self) -> bool:
        return all(r.state == "passed" for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "batch": self.name,
            "manifest": self.manifest,
            "total_budget_usd": str(self.total_budget_usd),
            "spent_usd": str(self.spent_usd),
            "states": self.counts,
            "calls": sum(r.calls for r in self.rows),
            "tokens": {
                "input": u.input_tokens,
                "output": u.output_tokens,
                "cache_read": u.cache_read_tokens,
                "cache_write": u.cache_write_tokens,
            },
            "jobs": [r.to_dict() for r in self.rows],
        }


def build_report(manifest: Manifest, store: BatchStore | None) -> BatchReport:
    """Rows in manifest order; a job the store has not seen yet is ``pending``."""
    rows = {r.name: r for r in store.jobs()} if store else {}
    spending = store.spending() if store else {}
    out = []
    for entry in manifest.jobs:
        row = rows.get(entry.name)
        spent = spending.get(entry.name, Spending())
        sps = row.steps_per_second if row else None
        reference = entry.reference_steps_per_second
        out.append(
            ReportRow(
                job=entry.name,
                env=row.env if row else entry.ref,
                target=entry.target,
                model=entry.model,
                state=row.state if row else "pending",
                status=row.status if row else None,
                message=row.message if row else None,
                levels_required=entry.levels,
                levels_passed=row.levels_passed if row else (),
                best_level=row.best_level if row else None,
                iterations=row.iterations if row else 0,
                attempts=row.attempts if row else 0,
                calls=spent.calls,
                usage=spent.usage,
                cost_usd=spent.cost_usd,
                wall_s=row.wall_s if row else 0.0,
                steps_per_second=sps,
                speedup=sps / reference if sps and reference else None,
                out=row.out if row else None,
            )
        )
    return BatchReport(
        manifest.name, str(manifest.path), manifest.settings.total_budget_usd, tuple(out)
    )


def fmt_levels(levels: tuple[int, ...]) -> str:
    return " ".join(f"L{lv}" for lv in levels) or "-"


def fmt_wall(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def fmt_speedup(row: ReportRow) -> str:
    """The speedup when the reference's steps/s is known, else the port's measured steps/s."""
    if row.speedup is not None:
        return f"{row.speedup:.1f}x"
    if row.steps_per_second is not None:
        return f"{row.steps_per_second:,.0f} steps/s"
    return "-"


COLUMNS = ("job", "env", "target", "model", "state", "levels passed", "iters", "tokens in",
           "tokens out", "cost (USD)", "wall", "speedup")  # fmt: skip


def _cells(row: ReportRow) -> list[str]:
    return [
        row.job,
        row.env,
        row.target,
        row.model,
        row.state,
        fmt_levels(row.levels_passed),
        str(row.iterations),
        f"{row.usage.total_input:,}",
        f"{row.usage.output_tokens:,}",
        f"{row.cost_usd:.4f}",
        fmt_wall(row.wall_s),
        fmt_speedup(row),
    ]


def _total_line(report: BatchReport) -> str:
    counts = ", ".join(f"{n} {state}" for state, n in report.counts.items())
    return (
        f"{len(report.rows)} jobs: {counts}; spent ${report.spent_usd:.4f} of "
        f"${report.total_budget_usd}"
    )


def to_markdown(report: BatchReport) -> str:
    lines = [
        f"# Batch {report.name}",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in report.rows]
    lines += ["", _total_line(report) + ".", ""]
    return "\n".join(lines)


def show_report(report: BatchReport, console: Console) -> None:
    table = Table(title=f"envforge batch {report.name}")
    for column in COLUMNS:
        numeric = column in ("iters", "tokens in", "tokens out", "cost (USD)", "wall", "speedup")
        table.add_column(column, justify="right" if numeric else "left")
    for row in report.rows:
        cells = [shown(one_line(cell)) for cell in _cells(row)]
        cells[4].stylize(STATE_COLORS.get(row.state, "white"))
        table.add_row(*cells)
    console.print(table)
    for row in report.rows:
        if row.state in ("failed", "error", "budget-exhausted") and row.message:
            # the message quotes what the job's agent, port or reference said
            console.print(Text.assemble((row.job, "bold"), ": ", shown(indented(row.message))))
    console.print(_total_line(report))


def show_status(report: BatchReport, console: Console) -> None:
    """The short view: where each job stands."""
    table = Table(title=f"envforge batch {report.name}: status")
    for column in ("job", "state", "iters", "best level", "cost (USD)", "wall", "attempts"):
        table.add_column(column)
    for row in report.rows:
        best = "-" if row.best_level is None else f"L{row.best_level}"
        table.add_row(
            shown(one_line(row.job)),
            shown(row.state, style=STATE_COLORS.get(row.state, "white")),
            str(row.iterations),
            best,
            f"{row.cost_usd:.4f}",
            fmt_wall(row.wall_s),
            str(row.attempts),
        )
    console.print(table)
    console.print(_total_line(report))
