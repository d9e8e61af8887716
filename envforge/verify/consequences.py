"""Groups that may follow from another: a state cause whose difference showed inside a step
without surviving to its end.

One agent step can be several frames (pong's frameskip of 4): an opponent paddle that moves
too fast in the first frame deflects the ball differently in the second, and may have caught
up with the reference's paddle by the last, so the step's first differing field is the ball's.
Such a group's example is tested on the reference alone: its state again with the other
group's field moved by the size of that group's difference (both ways). When the reference's
values of this group's fields change, this example's step reads that field, and the rarer group
is listed under the commoner one ("may follow from") instead of as a cause of its own. An
example whose step does not read the other field (a wall bounce far from the paddle) stays a
group of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from envforge.backends.base import State
from envforge.errors import DriverFailure
from envforge.verify.compare import values_close
from envforge.verify.findings import Finding
from envforge.verify.groups import Collector, Group

if TYPE_CHECKING:
    from envforge.verify.context import VerifyContext


def _moved(ctx: VerifyContext, state: dict[str, Any], name: str, by: float) -> list[dict]:
    """``state`` with field ``name`` moved by ``by`` up and down, inside the field's range."""
    f = ctx.spec.field(name)
    value = np.asarray(state[name], dtype=np.float64)
    lo, hi = f.limits(-np.inf, np.inf)
    rows = []
    for sign in (1.0, -1.0):
        if f.np_dtype.kind == "b":
            moved = ~np.asarray(state[name], dtype=bool)
        else:
            step = max(1.0, round(by)) if f.np_dtype.kind in "iu" else by
            moved = np.clip(value + sign * step, lo, hi).astype(f.np_dtype)
        if not np.array_equal(moved, np.asarray(state[name], dtype=f.np_dtype)):
            rows.append({**state, name: moved})
    return rows


def _outputs(ctx: VerifyContext, rows: list[dict], action: Any) -> dict[str, np.ndarray] | None:
    from envforge.verify.strategies import stack_actions, stack_states

    state: State = stack_states(ctx.spec, rows)
    actions = stack_actions(ctx.spec, [action] * len(rows))
    try:
        tr = ctx.ref.step(state, actions)
    except DriverFailure:
        return None
    out = dict(tr.state)
    out.update(reward=tr.reward, terminated=tr.terminated, truncated=tr.truncated, obs=tr.obs)
    return out


def reads(ctx: VerifyContext, finding: Finding, name: str, by: float) -> bool:
    """Whether the reference's values of ``finding``'s fields, from its example, change when
    field ``name`` of the state before is moved by ``by``."""
    if finding.state_before is None or len(finding.actions) != 1 or by == 0.0:
        return False
    if name not in finding.state_before:
        return False
    moved = _moved(ctx, finding.state_before, name, by)
    if not moved:
        return False
    outputs = _outputs(ctx, [finding.state_before, *moved], finding.actions[0])
    if outputs is None:
        return False
    for key in finding.fields:
        values = np.asarray(outputs[key])
        base = np.broadcast_to(values[:1], values.shape)
        if not values_close(base, values, 0.0, 0.0).all():
            return True
    return False


def _size(group: Group) -> float:
    error = group.finding.error.get(group.cause, 0.0)
    return float(error) if np.isfinite(error) else 0.0


def merge_consequences(ctx: VerifyContext, groups: Collector) -> None:
    """Move each group whose example reads a commoner state group's field under that group."""
    state = [g for g in groups.groups.values() if g.cause in ctx.spec.field_names]
    for group in sorted(groups.groups.values(), key=lambda g: g.count):
        if group.cause.startswith("reset:") or group.cause in ("obs", "rng.tape"):
            continue
        for other in sorted(state, key=lambda g: -g.count):
            if other is group or other.count <= group.count or other.cause not in groups.groups:
                continue
            if other.cause in group.finding.fields:
                continue
            if reads(ctx, group.finding, other.cause, _size(other)):
                follows = other.finding.extra.setdefault("may_follow", [])
                follows.append(
                    {
                        "cause": group.cause,
                        "count": group.count,
                        "message": group.finding.message,
                        "reads": other.cause,
                    }
                )
                other.count += group.count
                del groups.groups[group.cause]
                break
