"""`envforge cost`: what model calls have cost, by job, model or day, from the ledger."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from envforge.cost.ledger import GROUPINGS, Ledger, SummaryRow, default_ledger_path
from envforge.errors import BadInput


def cost_command(
    by: str = typer.Option("job", "--by", help="Group by job, model or day (UTC)."),
    job: str = typer.Option(None, "--job", help="Only this job."),
    ledger: str = typer.Option(
        None, "--ledger", help="Ledger file (default $ENVFORGE_LEDGER or .envforge/ledger.sqlite)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Report spending recorded in the cost ledger."""
    if by not in GROUPINGS:
        raise BadInput(f"--by: expected one of {', '.join(GROUPINGS)}, got {by!r}")
    path = Path(ledger) if ledger else default_ledger_path()
    if ledger and not path.is_file():  # a ledger named on purpose must exist: $0 would mislead
        raise BadInput(f"--ledger: no ledger at {path}")
    rows: list[SummaryRow] = []
    if path.exists():  # reporting never creates a ledger
        with Ledger(path) as book:
            rows = book.summary(by, job=job)  # type: ignore[arg-type]
    total = sum((r.cost_usd for r in rows), Decimal(0))
    if as_json:
        print(
            json.dumps(
                {
                    "by": by,
                    "ledger": str(path),
                    "rows": [_row_dict(r) for r in rows],
                    "total_usd": str(total),
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"envforge cost by {by} ({path})")
    for column in (by, "calls", "input", "output", "cache read", "cache write", "cost (USD)"):
        table.add_column(column, justify="left" if column == by else "right")
    for r in rows:
        u = r.usage
        table.add_row(
            r.key,
            str(r.calls),
            f"{u.input_tokens:,}",
            f"{u.output_tokens:,}",
            f"{u.cache_read_tokens:,}",
            f"{u.cache_write_tokens:,}",
            f"{r.cost_usd:.4f}",
        )
    table.add_row("total", str(sum(r.calls for r in rows)), "", "", "", "", f"{total:.4f}")
    Console().print(table)


def _row_dict(row: SummaryRow) -> dict[str, object]:
    u = row.usage
    return {
        "key": row.key,
        "calls": row.calls,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cost_usd": str(row.cost_usd),
    }


def register(app: typer.Typer) -> None:
    app.command("cost")(cost_command)
