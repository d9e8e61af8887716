"""A call that failed during L0's rollout, pinned to the episode that failed.

A batched ``step`` that raises says only that some row raised. L0 re-steps the rows one at a
time (when the failing side is still alive: an exception, not a crash or a timeout) to find the
first row that fails on its own, and raises the failure again with that row's seed, the step,
the state it was given and the actions from its reset, so the report can say which episode,
where, and from what state (a reference that raises on a state is the reference's finding, not
an anonymous "reference error").
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from envforge.backends.base import State, take_state
from envforge.errors import DriverCrashed, DriverFailure, DriverRaised, DriverTimeout
from envforge.verify.findings import to_jsonable


def _as_failure(side: str, exc: BaseException) -> DriverFailure:
    """``exc`` as the DriverFailure an isolated driver would have raised."""
    if isinstance(exc, DriverFailure):
        return exc
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return DriverRaised(side, "step", f"raised {type(exc).__name__}: {exc}", tb)


def _failing_row(driver: Any, state: State, actions: np.ndarray) -> int | None:
    """The first row that fails when stepped alone (None: none does, or it cannot be told)."""
    for j in range(len(actions)):
        try:
            driver.step(take_state(state, slice(j, j + 1)), actions[j : j + 1])
        except (DriverCrashed, DriverTimeout):
            return None  # the side is gone: no more single steps
        except Exception:
            return j
    return None


def failed_step(
    checker: Any,
    exc: BaseException,
    state: State,
    actions: np.ndarray,
    rows: np.ndarray,
    seeds: np.ndarray,
    t: int,
    actions_seen: list[np.ndarray],
) -> DriverFailure:
    """The failure of L0's rollout step ``t`` (``rows``: the running episodes, whose states and
    actions were ``state`` and ``actions``), with the failing episode's seed, step and state."""
    failure = _as_failure(checker.side, exc)
    alive = not isinstance(failure, DriverCrashed | DriverTimeout)
    j = _failing_row(checker.driver, state, actions) if alive else None
    where = (
        f"L0's rollout, step {t} of the episode of seed {int(seeds[rows[j]])}"
        if j is not None
        else f"L0's rollout, step {t} (a batch of {len(rows)} running episodes, seeds "
        f"{', '.join(str(int(seeds[r])) for r in rows[:4])}{', ...' if len(rows) > 4 else ''})"
    )
    pinned = type(failure)(
        failure.side, failure.call, f"{failure.message} (at {where})", failure.detail
    )
    pinned.step = t
    if j is not None:
        row = int(rows[j])
        pinned.seed = int(seeds[row])
        pinned.state_before = to_jsonable({k: v[j] for k, v in state.items()})
        pinned.actions = [to_jsonable(a[row]) for a in actions_seen]
    return pinned
