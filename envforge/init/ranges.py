"""Drafted ranges checked against the reference: L1 draws states from them, so it steps the
reference from each end of each range before a spec says so.

From a few reached states (random episodes), each field in turn is set to the low and then the
high end of its drafted range (every element, for an array field) and the reference is
stepped with random actions. A range whose end makes the reference raise (a float range's
headroom below 0 where ``step`` takes a square root, say) is narrowed to the values the probe
saw; if an end of the values seen still makes it raise (a value fine only with other fields
that L1 draws independently), the field says so in its comment, with the value and the error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from envforge.backends.attrs import ELAPSED_STEPS, SEED
from envforge.backends.base import State, take_state
from envforge.init.selfcheck import reference_driver
from envforge.spec import EnvSpec

if TYPE_CHECKING:
    from envforge.init.draft import Draft
    from envforge.init.fields import FieldDraft

STATES = 8
"""Reached states each end is written into."""


def check_ranges(draft: Draft) -> list[str]:
    """Narrow or mark the drafted ranges whose ends make the reference raise; the fields whose
    range was narrowed (their comments say why)."""
    spec = draft.spec()
    driver = reference_driver(spec)
    rng = np.random.default_rng(29)
    narrowed = []
    try:
        reached = _reached(spec, driver, rng)
        if reached is None:
            return []
        for f in draft.fields:
            if f.low is None or f.pad is not None or f.attr in (SEED, ELAPSED_STEPS):
                continue
            if f.dtype == "bool":
                continue
            failure = _raises(spec, driver, reached, f, (f.low, f.high), rng)
            if failure is None:
                continue
            if f.seen is not None and (f.low, f.high) != f.seen:
                old = (f.low, f.high)
                f.low, f.high = f.seen
                narrowed.append(f.name)
                f.notes.append(
                    f"range narrowed from {old[0]:g}..{old[1]:g} to the values seen: {failure}"
                )
                failure = _raises(spec, driver, reached, f, (f.low, f.high), rng)
            if failure is not None:
                f.notes.append(
                    f"GUESS: even the values seen can make the reference raise with the rest of "
                    f"a reached state ({failure}): L1 draws fields independently, so add a "
                    "`valid` rule or narrow the range (docs/SPEC.md)"
                )
    finally:
        driver.close()
    return narrowed


def _reached(spec: EnvSpec, driver: Any, rng: np.random.Generator) -> State | None:
    """States of uniform random episodes a few steps from their resets."""
    from envforge.verify.policies import random_actions

    state = driver.reset(np.arange(STATES, dtype=np.uint32) + 777)
    for _ in range(int(rng.integers(1, 6))):
        tr = driver.step(state, random_actions(spec, rng, STATES))
        live = ~(tr.terminated | tr.truncated)
        if live.all():
            state = tr.state
    return state


def _raises(
    spec: EnvSpec,
    driver: Any,
    reached: State,
    f: FieldDraft,
    ends: tuple[float | None, float | None],
    rng: np.random.Generator,
) -> str | None:
    """Why stepping from a reached state with ``f`` at an end of ``ends`` raises (None if it
    does not)."""
    from envforge.verify.policies import random_actions

    for end in ends:
        state = {k: np.array(v) for k, v in reached.items()}
        state[f.name][...] = end
        for i in range(len(state[f.name])):
            row = take_state(state, slice(i, i + 1))
            try:
                driver.step(row, random_actions(spec, rng, 1))
            except Exception as e:
                return f"{f.name} = {end:g} raised {type(e).__name__}: {e}"[:200]
    return None
