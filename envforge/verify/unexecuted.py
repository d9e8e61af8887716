"""L1: draws steered towards the reference lines no other L1 check executed.

After L1's other step checks, the reference's coverage so far (``coverage/lines.py``) names
the lines none of their states reached. Hypothesis then draws batches of states and actions the
way L1 does (the spec's ranges, boundaries over-weighted), both sides step and are compared, and
after each batch the reference's coverage says how many of those lines it newly ran; that count
is ``hypothesis.target``-ed, so the search keeps mutating the batches that reached new code. It
stops when every line has run or the budget is spent; a line still never executed is then one
that no valid state reaches in one step (or that depends on configuration the spec does not
use), and the report names it. Runs only while coverage is measured and lines are missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import Phase, given, seed, target
from hypothesis import strategies as st

from envforge.backends.base import State
from envforge.coverage.lines import LineCoverage
from envforge.errors import DriverFailure
from envforge.verify.context import VerifyContext
from envforge.verify.search import run_search, search_settings
from envforge.verify.strategies import action_strategy, stack_actions, stack_states, state_strategy

SEARCH_EXAMPLES = 40
"""Batches drawn at ``--scale 1`` (each costs a coverage read: ~10 ms gcov, more for coverage.py)."""

Line = tuple[str, int]


@dataclass
class SearchResult:
    missing_before: int = 0
    reached: list[Line] = field(default_factory=list)
    batches: int = 0
    failure: Any = None
    """What ``step`` returned for the first batch whose sides differed."""

    def stats(self) -> dict[str, Any]:
        return {
            "lines_missing_before": self.missing_before,
            "lines_reached": len(self.reached),
            "batches": self.batches,
        }


def _missing(coverage: list[LineCoverage]) -> set[Line]:
    return {(c.file, line) for c in coverage for line in c.never_executed()}


def search_unexecuted(ctx: VerifyContext, step: Callable[[State, np.ndarray], Any]) -> SearchResult:
    """``step(state, actions)`` steps and compares both sides, returning a failure or None."""
    result = SearchResult()
    try:
        coverage = ctx.ref.coverage_read()  # None unless the runner started counting
    except DriverFailure:
        return result  # coverage is a report: a reference that cannot give it is not a finding
    missing = _missing(coverage or [])
    result.missing_before = len(missing)
    if not missing:
        return result
    spec = ctx.spec
    batch = st.lists(
        st.tuples(state_strategy(spec), action_strategy(spec)),
        min_size=1,
        max_size=spec.verify.l1_batch,
    )

    @seed(ctx.options.seed + 17)
    @search_settings(ctx.count(SEARCH_EXAMPLES, 5), [Phase.generate, Phase.target])
    @given(batch)
    def reach(rows: list[tuple[dict[str, Any], Any]]) -> None:
        if not missing or result.failure is not None or errors:
            return
        state = stack_states(spec, [r[0] for r in rows])
        actions = stack_actions(spec, [r[1] for r in rows])
        result.batches += 1
        try:
            result.failure = step(state, actions)
            now = _missing(ctx.ref.coverage_read() or [])
        except DriverFailure as e:  # reported by the runner, like any L1 driver failure
            errors.append(e)
            return
        reached = missing - now
        missing.intersection_update(now)
        result.reached.extend(sorted(reached))
        target(float(len(reached)), label="reference lines newly executed")

    errors: list[DriverFailure] = []
    run_search(reach, (), lambda: bool(errors))
    if errors:
        raise errors[0]
    return result
