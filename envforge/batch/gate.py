"""The gate: the driver-side service every job's model calls pass through.

Before a live call a job asks for a reservation of the call's worst-case cost; it is granted
inside one ``BEGIN IMMEDIATE`` transaction only if the job's spending plus its open
reservations plus this call fits the job's budget, and the batch's spending plus every open
reservation plus this call fits the total. Two workers racing for the last dollars are
serialized by SQLite's write lock, so together they can never overspend. After the response,
its ledger row and its call-log entry are written and the reservation released in one
transaction: a kill at any moment leaves either all of it or none of it.

The worst case is an estimate and a provider can bill more than it. So the reservation is
reconciled with what was really billed before each call: it is at least the bill of the most
similar call already made, the job's previous call (requests grow through an episode), or for
a job's first call the largest first call of any job in the batch. A bill that outruns even
that can take spending past a budget by that one call's overrun (one per worker in flight);
the next call is then refused. See "One budget" in docs/BATCH.md.

Only the driver process owns a Gate. Local workers call it directly; Ray workers reach it
through a relay actor (see ``ray_executor``), so nothing writes SQLite over a network.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Protocol

from envforge.batch.store import BatchStore, JobOutcome, LoggedCall
from envforge.cost.budget import Budget, reconciled_worst_case
from envforge.cost.ledger import LedgerEntry
from envforge.errors import BudgetExceeded


@dataclass(frozen=True)
class Grant:
    reservation: int


@dataclass(frozen=True)
class Refusal:
    scope: str
    """job | batch: whose budget the call could exceed."""
    limit: Decimal
    spent: Decimal
    """Spent plus reserved by calls in flight, in that scope."""
    worst_case: Decimal


@dataclass(frozen=True)
class CallRecord:
    seq: int
    """1-based position of the call in its job (the replay order)."""
    digest: str
    response: str
    """The response as JSON."""
    entry: LedgerEntry


@dataclass(frozen=True)
class ProgressUpdate:
    iteration: int | None = None
    level: int | None = None
    """Highest level passed so far, in order from L0."""
    activity: str | None = None


@dataclass
class JobLine:
    """One job as the live display shows it."""

    name: str
    state: str
    iteration: int = 0
    level: int | None = None
    calls: int = 0
    cost_usd: Decimal = Decimal(0)
    activity: str = ""


@dataclass
class Board:
    lines: dict[str, JobLine] = field(default_factory=dict)
    total_budget_usd: Decimal = Decimal(0)

    @property
    def spent_usd(self) -> Decimal:
        return sum((line.cost_usd for line in self.lines.values()), Decimal(0))


class Gate:
    def __init__(
        self,
        store: BatchStore,
        total_budget_usd: Decimal,
        job_budgets: dict[str, Decimal | None],
    ) -> None:
        """``job_budgets``: every job of the manifest, with its own limit (None: none)."""
        self.store = store
        self.total = Budget(total_budget_usd)
        self.job_budgets = dict(job_budgets)
        self._lock = threading.Lock()
        self._started: dict[str, tuple[float, float]] = {}
        """job -> (wall seconds from earlier attempts, monotonic start of this one)"""
        self.board = Board(total_budget_usd=total_budget_usd)
        spending = store.spending()
        for row in store.jobs():
            if row.name not in self.job_budgets:  # no longer in the manifest
                continue
            spent = spending.get(row.name)
            self.board.lines[row.name] = JobLine(
                row.name,
                row.state,
                row.iterations,
                row.best_level,
                spent.calls if spent else 0,
                spent.cost_usd if spent else Decimal(0),
            )

    # ---- what workers call ------------------------------------------------------------
    def logged_call(self, job: str, seq: int) -> LoggedCall | None:
        return self.store.logged_call(job, seq)

    def reserve(self, job: str, worst_case: Decimal) -> Grant | Refusal:
        with self.store.transaction() as tx:
            seen = tx.last_bill(job)
            if seen is None:
                seen = tx.largest_first_bill()
            worst_case = reconciled_worst_case(worst_case, seen)
            job_spent = tx.spent(job) + tx.reserved(job)
            refusal = _refusal("job", Budget(self.job_budgets.get(job)), job_spent, worst_case)
            if refusal is None:
                batch_spent = tx.spent() + tx.reserved()
                refusal = _refusal("batch", self.total, batch_spent, worst_case)
            if refusal is not None:
                return refusal
            return Grant(tx.reserve(job, worst_case))

    def settle(self, reservation: int, record: CallRecord) -> None:
        job = record.entry.job
        with self.store.transaction() as tx:
            tx.log_call(record.seq, record.digest, record.response, record.entry)
            tx.release(reservation)
            if job in self._started:
                tx.set_wall(job, self._wall(job))
        with self._lock:
            line = self._line(job)
            line.calls += 1
            line.cost_usd += record.entry.cost_usd

    def release(self, reservation: int) -> None:
        with self.store.transaction() as tx:
            tx.release(reservation)

    def memo_get(self, kind: str, key: str) -> bytes | None:
        return self.store.memo_get(kind, key)

    def memo_put(self, kind: str, key: str, value: bytes) -> None:
        self.store.memo_put(kind, key, value)

    def progress(self, job: str, update: ProgressUpdate) -> None:
        with self._lock:
            line = self._line(job)
            if line.state != "running":  # a late display update from a finished job
                return
            if update.iteration is not None:
                line.iteration = update.iteration
            if update.level is not None and (line.level is None or update.level > line.level):
                line.level = update.level
            if update.activity is not None:
                line.activity = update.activity

    # ---- what the executor calls ------------------------------------------------------
    def start(self, job: str) -> None:
        earlier = self.store.start(job)
        self._started[job] = (earlier, time.monotonic())
        with self._lock:
            line = self._line(job)
            line.state, line.activity = "running", "starting"

    def finish(self, job: str, outcome: JobOutcome) -> None:
        self.store.finish(job, outcome, self._wall(job))
        self._started.pop(job, None)
        with self._lock:
            line = self._line(job)
            line.state, line.activity = outcome.state, outcome.message
            line.iteration = outcome.iterations
            line.level = outcome.best_level

    def snapshot(self) -> Board:
        with self._lock:
            lines = {name: replace(line) for name, line in self.board.lines.items()}
        return Board(lines, self.board.total_budget_usd)

    def _wall(self, job: str) -> float:
        earlier, since = self._started.get(job, (0.0, time.monotonic()))
        return earlier + time.monotonic() - since

    def _line(self, job: str) -> JobLine:
        return self.board.lines.setdefault(job, JobLine(job, "pending"))


def _refusal(scope: str, budget: Budget, spent: Decimal, worst_case: Decimal) -> Refusal | None:
    try:
        budget.check(spent, worst_case)
    except BudgetExceeded as e:
        return Refusal(scope, e.limit, spent, worst_case)
    return None


class BatchBudgetExceeded(BudgetExceeded):
    """The call could push the whole batch past its total budget."""

    def __init__(self, limit: Decimal, spent: Decimal, worst_case: Decimal) -> None:
        super().__init__(limit, spent, worst_case)
        self.args = (f"batch {self.args[0]}",)


def budget_error(refusal: Refusal) -> BudgetExceeded:
    kind = BatchBudgetExceeded if refusal.scope == "batch" else BudgetExceeded
    return kind(refusal.limit, refusal.spent, refusal.worst_case)


class Channel(Protocol):
    """A worker's line to the gate: the Gate itself in-process, or a relay to the driver."""

    def logged_call(self, job: str, seq: int) -> LoggedCall | None: ...

    def reserve(self, job: str, worst_case: Decimal) -> Grant | Refusal: ...

    def settle(self, reservation: int, record: CallRecord) -> None: ...

    def release(self, reservation: int) -> None: ...

    def memo_get(self, kind: str, key: str) -> bytes | None: ...

    def memo_put(self, kind: str, key: str, value: bytes) -> None: ...

    def progress(self, job: str, update: ProgressUpdate) -> None: ...


CHANNEL_OPS = frozenset(
    ("logged_call", "reserve", "settle", "release", "memo_get", "memo_put", "progress")
)
"""The Gate methods a relay may invoke on a worker's behalf."""
