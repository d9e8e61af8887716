"""The meter: every call is budget-checked before it is made and priced and logged after.

The check assumes the call's worst case: its input as estimated from the previous call's billed
usage (``estimate.InputTokenEstimate``) at the dearest input rate, plus ``max_tokens`` output.
A replayed cassette costs nothing: its rows go to the ledger at $0 under ``replay:<model>``,
while the budget is checked against what the recorded calls cost, so a replay stops where the
recorded run stopped.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Protocol

from envforge.agents.messages import Model, ModelRequest, ModelResponse, Usage
from envforge.cost.budget import Budget
from envforge.cost.estimate import InputTokenEstimate
from envforge.cost.ledger import Ledger, LedgerEntry
from envforge.cost.prices import Price


class Meter(Protocol):
    """What the repair loop needs from a metered model: calls, and running totals of this run."""

    name: str
    purpose: str
    """Labels the ledger rows of the next calls (the orchestrator sets it per episode)."""
    calls: int
    usage: Usage
    cost_usd: Decimal

    def complete(self, request: ModelRequest) -> ModelResponse: ...


class BaseMeter:
    """What every meter shares: the wrapped model, running totals of this run, the worst case
    of the next call and the ledger row of one call (``MeteredModel`` here, ``BatchMeter`` in
    a batch)."""

    def __init__(self, model: Model, price: Price, job: str, run: str, purpose: str) -> None:
        self.inner = model
        self.name = model.name
        self.price = price
        self.job = job
        self.run = run
        self.purpose = purpose
        self.calls = 0
        self.usage = Usage()
        self.cost_usd = Decimal(0)
        """Spent by this run (the job may have spent more in earlier runs)."""
        self.estimate = InputTokenEstimate()
        """Input tokens of the next call, from the last call's billed usage."""

    def worst_case(self, request: ModelRequest) -> Decimal:
        return self.price.worst_case(self.estimate(request), request.max_tokens)

    def ledger_entry(
        self, usage: Usage, cost: Decimal, model: str | None = None, price_version: str = ""
    ) -> LedgerEntry:
        return LedgerEntry(
            job=self.job,
            run=self.run,
            purpose=self.purpose,
            model=model or self.name,
            usage=usage,
            cost_usd=cost,
            price_version=price_version or self.price.version,
        )

    def count(self, response: ModelResponse, cost: Decimal) -> ModelResponse:
        """Add a finished call to the totals; the response carries its cost."""
        self.calls += 1
        self.usage = self.usage + response.usage
        self.cost_usd += cost
        return replace(response, cost_usd=cost)


class MeteredModel(BaseMeter):
    """A Model that refuses calls the budget cannot cover and records each call it makes.

    The budget covers everything the job has spent in the ledger, so a resumed job cannot
    spend its budget twice. ``purpose`` labels the ledger rows (the orchestrator sets it).
    """

    def __init__(
        self,
        model: Model,
        price: Price,
        ledger: Ledger,
        budget: Budget,
        job: str,
        run: str,
        purpose: str = "translate",
    ) -> None:
        super().__init__(model, price, job, run, purpose)
        self.ledger = ledger
        self.budget = budget
        self.replay = bool(getattr(model, "replay", False))
        self.recorded_usd = Decimal(0)
        """What the replayed calls cost when they were recorded (replays only)."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        spent = self.ledger.spent(job=self.job) + self.recorded_usd
        self.budget.check(spent, self.worst_case(request))
        response = self.inner.complete(request)
        cost = self.price.cost(response.usage)
        self.estimate.observe(request, response.usage)
        if self.replay:
            self.recorded_usd += cost
            cost = Decimal(0)
            entry = self.ledger_entry(response.usage, cost, f"replay:{self.name}", "replay")
        else:
            entry = self.ledger_entry(response.usage, cost)
        self.ledger.record(entry)
        return self.count(response, cost)
