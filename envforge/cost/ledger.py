"""The cost ledger: one SQLite row per model call (WAL mode), committed before the next call.

Costs are stored as exact decimal strings and summed with Decimal in Python, never as floats.
The ledger holds usage and money only: no prompts, no responses, no credentials.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Literal

from envforge.agents.messages import Usage
from envforge.errors import BadInput

DEFAULT_LEDGER = Path(".envforge") / "ledger.sqlite"
GROUPINGS = ("job", "model", "day")
Grouping = Literal["job", "model", "day"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    day TEXT NOT NULL,
    job TEXT NOT NULL,
    run TEXT NOT NULL,
    purpose TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_usd TEXT NOT NULL,
    price_version TEXT NOT NULL,
    cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS calls_job ON calls(job);
"""


def default_ledger_path() -> Path:
    """``$ENVFORGE_LEDGER`` if set, else ``.envforge/ledger.sqlite`` under the working directory."""
    return Path(os.environ.get("ENVFORGE_LEDGER") or DEFAULT_LEDGER)


@dataclass(frozen=True)
class LedgerEntry:
    job: str
    run: str
    purpose: str
    """What the call was for, e.g. ``translate`` or ``repair 3``."""
    model: str
    usage: Usage
    cost_usd: Decimal
    price_version: str
    ts: str = ""
    """UTC ISO timestamp; filled in when recorded."""


@dataclass(frozen=True)
class SummaryRow:
    key: str
    calls: int
    usage: Usage
    cost_usd: Decimal


class Ledger:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_ledger_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            add_missing_columns(self._db)
        except (OSError, sqlite3.Error) as e:
            raise BadInput(f"cannot open cost ledger {self.path}: {e}") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        """Write one call and commit it (durable before the caller makes its next call)."""
        with self._db:
            return insert_entry(self._db, entry)

    def entries(self, job: str | None = None, run: str | None = None) -> list[LedgerEntry]:
        query = (
            "SELECT job, run, purpose, model, input_tokens, output_tokens, cache_read_tokens,"
            " cache_write_tokens, cost_usd, price_version, ts, cache_write_1h_tokens FROM calls"
        )
        clauses, args = [], []
        if job is not None:
            clauses.append("job = ?")
            args.append(job)
        if run is not None:
            clauses.append("run = ?")
            args.append(run)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        rows = self._db.execute(query + " ORDER BY id", args).fetchall()
        return [
            LedgerEntry(
                r[0],
                r[1],
                r[2],
                r[3],
                Usage(r[4], r[5], r[6], r[7], r[11]),
                Decimal(r[8]),
                r[9],
                r[10],
            )
            for r in rows
        ]

    def spent(self, job: str | None = None, run: str | None = None) -> Decimal:
        return sum((e.cost_usd for e in self.entries(job, run)), Decimal(0))

    def summary(self, by: Grouping, job: str | None = None) -> list[SummaryRow]:
        """Calls, tokens and cost grouped by job, model or UTC day."""
        if by not in GROUPINGS:
            raise BadInput(f"--by: expected one of {', '.join(GROUPINGS)}, got {by!r}")
        groups: dict[str, tuple[int, Usage, Decimal]] = {}
        for e in self.entries(job):
            key = {"job": e.job, "model": e.model, "day": e.ts[:10]}[by]
            calls, usage, cost = groups.get(key, (0, Usage(), Decimal(0)))
            groups[key] = (calls + 1, usage + e.usage, cost + e.cost_usd)
        return [SummaryRow(k, *v) for k, v in sorted(groups.items())]


def add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring a ledger written by an older envforge up to this schema (columns added since)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
    if "cache_write_1h_tokens" not in columns:
        with db:
            db.execute(
                "ALTER TABLE calls ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0"
            )


def insert_entry(db: sqlite3.Connection, entry: LedgerEntry) -> LedgerEntry:
    """Insert one call row without committing, so a caller can make it part of a larger
    transaction (the batch store writes it together with the call log)."""
    ts = entry.ts or datetime.now(UTC).isoformat(timespec="seconds")
    u = entry.usage
    db.execute(
        "INSERT INTO calls (ts, day, job, run, purpose, model, input_tokens, output_tokens,"
        " cache_read_tokens, cache_write_tokens, cost_usd, price_version, cache_write_1h_tokens)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            ts,
            ts[:10],
            entry.job,
            entry.run,
            entry.purpose,
            entry.model,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            str(entry.cost_usd),
            entry.price_version,
            u.cache_write_1h_tokens,
        ),
    )
    return replace(entry, ts=ts)
