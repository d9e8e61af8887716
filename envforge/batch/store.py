"""The batch's SQLite job store: one WAL database per batch, written only by the driver process.

Tables: ``jobs`` (state and outcome of each job), ``calls`` (the cost ledger, the same schema
as ``envforge cost`` reads), ``call_log`` (each call's request digest and response, so a resumed
job replays instead of paying again), ``reservations`` (worst-case costs of calls in flight)
and ``memo`` (verification reports and throughput measurements, by content).

Every write that must be atomic happens inside :meth:`BatchStore.transaction`, which takes
SQLite's write lock up front (``BEGIN IMMEDIATE``), so threads and processes sharing the file
see each other's reservations before they decide.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from envforge.agents.messages import Usage
from envforge.cost.ledger import SCHEMA as LEDGER_SCHEMA
from envforge.cost.ledger import LedgerEntry, add_missing_columns, insert_entry
from envforge.errors import BadInput

FINISHED = ("passed", "failed", "budget-exhausted", "error")
STATES = ("pending", "running", *FINISHED)

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    config TEXT NOT NULL,
    env TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    status TEXT,
    message TEXT,
    iterations INTEGER NOT NULL DEFAULT 0,
    best_level INTEGER,
    levels_passed TEXT NOT NULL DEFAULT '',
    wall_s REAL NOT NULL DEFAULT 0,
    steps_per_second REAL,
    out TEXT
);
CREATE TABLE IF NOT EXISTS call_log (
    job TEXT NOT NULL,
    seq INTEGER NOT NULL,
    digest TEXT NOT NULL,
    response TEXT NOT NULL,
    cost_usd TEXT NOT NULL,
    PRIMARY KEY (job, seq)
);
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    amount_usd TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memo (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (kind, key)
);
"""


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class LoggedCall:
    digest: str
    response: str
    """The response as JSON (``response_to_dict``)."""
    cost_usd: Decimal


@dataclass(frozen=True)
class JobKey:
    """A manifest job as the store knows it."""

    name: str
    config: str
    """Digest of everything that shapes the job's calls."""
    env: str


@dataclass(frozen=True)
class JobRow:
    name: str
    position: int
    config: str
    env: str
    state: str
    attempts: int
    created_at: str
    started_at: str | None
    finished_at: str | None
    status: str | None
    message: str | None
    iterations: int
    best_level: int | None
    levels_passed: tuple[int, ...]
    wall_s: float
    steps_per_second: float | None
    out: str | None


@dataclass(frozen=True)
class Spending:
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)


@dataclass(frozen=True)
class JobOutcome:
    """What a finished job leaves in the ``jobs`` table."""

    state: str
    status: str
    message: str
    iterations: int
    best_level: int | None
    levels_passed: tuple[int, ...]
    steps_per_second: float | None
    out: str | None


class Tx:
    """SQL inside one open transaction (see :meth:`BatchStore.transaction`)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def spent(self, job: str | None = None) -> Decimal:
        rows = self.db.execute(
            "SELECT cost_usd FROM calls" + (" WHERE job = ?" if job else ""),
            (job,) if job else (),
        )
        return sum((Decimal(r[0]) for r in rows), Decimal(0))

    def reserved(self, job: str | None = None) -> Decimal:
        rows = self.db.execute(
            "SELECT amount_usd FROM reservations" + (" WHERE job = ?" if job else ""),
            (job,) if job else (),
        )
        return sum((Decimal(r[0]) for r in rows), Decimal(0))

    def reserve(self, job: str, amount: Decimal) -> int:
        cursor = self.db.execute(
            "INSERT INTO reservations (job, amount_usd) VALUES (?, ?)", (job, str(amount))
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def release(self, reservation: int) -> None:
        self.db.execute("DELETE FROM reservations WHERE id = ?", (reservation,))

    def last_bill(self, job: str) -> Decimal | None:
        """What the job's latest logged call cost (None before its first)."""
        row = self.db.execute(
            "SELECT cost_usd FROM call_log WHERE job = ? ORDER BY seq DESC LIMIT 1", (job,)
        ).fetchone()
        return None if row is None else Decimal(row[0])

    def largest_first_bill(self) -> Decimal | None:
        """The most any job's first call cost (None before any call was logged)."""
        rows = self.db.execute("SELECT cost_usd FROM call_log WHERE seq = 1").fetchall()
        return max((Decimal(r[0]) for r in rows), default=None)

    def log_call(self, seq: int, digest: str, response: str, entry: LedgerEntry) -> None:
        insert_entry(self.db, entry)
        self.db.execute(
            "INSERT INTO call_log (job, seq, digest, response, cost_usd) VALUES (?, ?, ?, ?, ?)",
            (entry.job, seq, digest, response, str(entry.cost_usd)),
        )

    def set_wall(self, job: str, wall_s: float) -> None:
        self.db.execute("UPDATE jobs SET wall_s = ? WHERE name = ?", (wall_s, job))


class BatchStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT)
            self._db = sqlite3.connect(
                self.path, timeout=60.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(LEDGER_SCHEMA + SCHEMA)
            add_missing_columns(self._db)
        except (OSError, sqlite3.Error) as e:
            raise BadInput(f"cannot open batch store {self.path}: {e}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> BatchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One atomic write: all of it is committed, or (on any error, or a kill) none of it."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ---- jobs -------------------------------------------------------------------------
    def sync_jobs(self, jobs: list[JobKey]) -> list[str]:
        """Add the manifest's jobs in order. An unfinished job whose config changed forgets
        its call log (its spending stays in the ledger). Returns the names of those."""
        forgotten = []
        with self.transaction() as tx:
            for position, job in enumerate(jobs):
                row = tx.db.execute(
                    "SELECT config, state FROM jobs WHERE name = ?", (job.name,)
                ).fetchone()
                if row is None:
                    tx.db.execute(
                        "INSERT INTO jobs (name, position, config, env, state, created_at)"
                        " VALUES (?, ?, ?, ?, 'pending', ?)",
                        (job.name, position, job.config, job.env, now_text()),
                    )
                    continue
                if row[0] != job.config and row[1] not in FINISHED:
                    tx.db.execute("DELETE FROM call_log WHERE job = ?", (job.name,))
                    forgotten.append(job.name)
                tx.db.execute(
                    "UPDATE jobs SET position = ?, config = ?, env = ? WHERE name = ?",
                    (position, job.config, job.env, job.name),
                )
        return forgotten

    def recover(self) -> list[str]:
        """After a crash: jobs left running become pending, reservations of dead calls go."""
        with self.transaction() as tx:
            names = [r[0] for r in tx.db.execute("SELECT name FROM jobs WHERE state = 'running'")]
            tx.db.execute("UPDATE jobs SET state = 'pending' WHERE state = 'running'")
            tx.db.execute("DELETE FROM reservations")
        return names

    def start(self, job: str) -> float:
        """Mark a job running; returns the wall time it already has from earlier attempts."""
        with self.transaction() as tx:
            tx.db.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
                " started_at = COALESCE(started_at, ?) WHERE name = ?",
                (now_text(), job),
            )
            row = tx.db.execute("SELECT wall_s FROM jobs WHERE name = ?", (job,)).fetchone()
        return float(row[0])

    def finish(self, job: str, outcome: JobOutcome, wall_s: float) -> None:
        with self.transaction() as tx:
            tx.db.execute(
                "UPDATE jobs SET state = ?, status = ?, message = ?, iterations = ?,"
                " best_level = ?, levels_passed = ?, steps_per_second = ?, out = ?,"
                " wall_s = ?, finished_at = ? WHERE name = ?",
                (
                    outcome.state,
                    outcome.status,
                    outcome.message,
                    outcome.iterations,
                    outcome.best_level,
                    ",".join(str(lv) for lv in outcome.levels_passed),
                    outcome.steps_per_second,
                    outcome.out,
                    wall_s,
                    now_text(),
                    job,
                ),
            )
            tx.db.execute("DELETE FROM reservations WHERE job = ?", (job,))

    def jobs(self) -> list[JobRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT name, position, config, env, state, attempts, created_at, started_at,"
                " finished_at, status, message, iterations, best_level, levels_passed, wall_s,"
                " steps_per_second, out FROM jobs ORDER BY position"
            ).fetchall()
        return [_job_row(r) for r in rows]

    # ---- calls ------------------------------------------------------------------------
    def logged_call(self, job: str, seq: int) -> LoggedCall | None:
        with self._lock:
            row = self._db.execute(
                "SELECT digest, response, cost_usd FROM call_log WHERE job = ? AND seq = ?",
                (job, seq),
            ).fetchone()
        return None if row is None else LoggedCall(row[0], row[1], Decimal(row[2]))

    def spending(self) -> dict[str, Spending]:
        """Calls, tokens and cost per job, from the ledger rows."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
                " cache_write_1h_tokens, cost_usd FROM calls ORDER BY id"
            ).fetchall()
        totals: dict[str, Spending] = {}
        for job, *tokens, cost in rows:
            before = totals.get(job, Spending())
            totals[job] = Spending(
                before.calls + 1, before.usage + Usage(*tokens), before.cost_usd + Decimal(cost)
            )
        return totals

    # ---- memo -------------------------------------------------------------------------
    def memo_get(self, kind: str, key: str) -> bytes | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM memo WHERE kind = ? AND key = ?", (kind, key)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def memo_put(self, kind: str, key: str, value: bytes) -> None:
        with self.transaction() as tx:
            tx.db.execute(
                "INSERT OR REPLACE INTO memo (kind, key, value) VALUES (?, ?, ?)",
                (kind, key, value),
            )


def _job_row(r: tuple[Any, ...]) -> JobRow:
    levels = tuple(int(x) for x in r[13].split(",") if x)
    return JobRow(
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
        levels, r[14], r[15], r[16],
    )  # fmt: skip


def open_existing(path: Path) -> BatchStore | None:
    """The store if the batch has run before (status and report never create one)."""
    return BatchStore(path) if path.is_file() else None
