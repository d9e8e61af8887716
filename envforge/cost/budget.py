"""Budgets: before every call, refuse it if its worst-case cost could exceed what is left."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from envforge.agents.messages import ModelRequest
from envforge.cost.prices import Price
from envforge.errors import BudgetExceeded

CHARS_PER_TOKEN_LOW = 3
"""Deliberately low (English and code average about 4): the input estimate should not undershoot."""


def estimate_input_tokens(request: ModelRequest) -> int:
    """An upper-leaning estimate of the request's input tokens, without a tokenizer."""
    return math.ceil(request.char_count() / CHARS_PER_TOKEN_LOW)


def worst_case_cost(request: ModelRequest, price: Price) -> Decimal:
    return price.worst_case(estimate_input_tokens(request), request.max_tokens)


@dataclass(frozen=True)
class Budget:
    limit_usd: Decimal | None
    """None: no limit (costs are still recorded)."""

    def check(self, spent: Decimal, worst_case: Decimal) -> None:
        if self.limit_usd is not None and spent + worst_case > self.limit_usd:
            raise BudgetExceeded(self.limit_usd, spent, worst_case)


def reconciled_worst_case(estimate: Decimal, billed_before: Decimal | None) -> Decimal:
    """A call's worst case, reconciled with billed usage: never less than what the provider
    billed for the most similar call already made (an estimate can undershoot a real bill;
    a bill cannot)."""
    return estimate if billed_before is None else max(estimate, billed_before)
