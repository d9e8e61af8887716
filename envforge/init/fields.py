"""Canonical state fields drafted from a probe: names, dtypes, ranges, each with its reasons."""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.attrs import ELAPSED_STEPS, SEED
from envforge.init.probe import AttrStats, Probe
from envforge.init.snapshot import BODY_MEMBERS
from envforge.init.source import element_names

HEADROOM = 0.1
"""Observed float ranges are widened by this fraction of their span on each side."""
PER_ELEMENT = 8
"""Arrays up to this size become one scalar field per element (each with its own range)."""
RESERVED = {"before", "after", "action", "reward", "terminated", "truncated", "obs", "t"}


@dataclass
class FieldDraft:
    name: str
    dtype: str
    attr: str
    source_attr: str
    """The attribute this field lives in (``state`` for ``state[2]``)."""
    index: int | None = None
    shape: tuple[int, ...] = ()
    low: float | None = None
    high: float | None = None
    aliases: tuple[str, ...] = ()
    atol: float | None = None
    pad: float | None = None
    notes: list[str] = field(default_factory=list)
    integral: bool = False
    """Every value the probe saw was a whole number (ints, bools, a 0/1 map kept as floats):
    compared exactly, never within a tolerance."""
    seen: tuple[float, float] | None = None
    """The smallest and largest value the probe saw (the drafted range may add headroom)."""

    @property
    def exact(self) -> bool:
        """Compared exactly: not a float, or a float that only ever held whole numbers."""
        return self.integral or not self.dtype.startswith("float")

    @property
    def scale(self) -> float:
        """The largest magnitude the field took: no tolerance may be wider than a part of it."""
        if self.seen is None:
            return 0.0
        return float(max(abs(self.seen[0]), abs(self.seen[1])))

    def table(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "dtype": self.dtype}
        if self.shape:
            out["shape"] = list(self.shape)
        if self.pad is not None:
            out["pad"] = self.pad
        if self.low is not None:
            out["low"] = self.low
            out["high"] = self.high
        if self.attr:
            out["attr"] = self.attr
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.atol is not None:
            out["atol"] = self.atol
        return out


def spec_dtype(numpy_dtype: str, low: float, high: float) -> tuple[str, str | None]:
    """The spec dtype for an attribute's numpy dtype, and a note when it is not the same."""
    kind = np.dtype(numpy_dtype).kind
    if kind == "f":
        return ("float32", None) if numpy_dtype == "float32" else ("float64", None)
    if kind == "b":
        return "bool", None
    if numpy_dtype in ("int32", "uint32", "uint8", "uint64"):
        return numpy_dtype, None
    if np.iinfo(np.int32).min <= low and high <= np.iinfo(np.int32).max:
        return "int32", f"{numpy_dtype} on the reference; every value seen fits int32"
    return "int64", None


def _round_out(value: float, up: bool) -> float:
    """``value`` rounded outward to 4 significant digits (readable, still covering it)."""
    if value == 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(abs(value))) - 3
    steps = math.ceil(value / 10**exponent) if up else math.floor(value / 10**exponent)
    return float(f"{steps}e{exponent}")


def range_note(
    lo: float, hi: float, dtype: str, seen: str, integral: bool = False
) -> tuple[float, float, str]:
    """The drafted range for values seen in ``[lo, hi]``, and the comment that says so
    (``integral``: a float field that only held whole numbers gets no headroom)."""
    if dtype == "bool":
        return 0, 1, f"a flag (observed over {seen}: {int(lo)}..{int(hi)})"
    if np.dtype(dtype).kind in "iu":
        return (
            int(lo),
            int(hi),
            f"observed over {seen} ({int(lo)}..{int(hi)}): widen it to every valid value",
        )
    if integral:
        return (
            float(lo),
            float(hi),
            f"observed over {seen} ({lo:g}..{hi:g}), whole numbers only, so no headroom: "
            "widen it to every valid value",
        )
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    low, high = _round_out(lo - HEADROOM * span, False), _round_out(hi + HEADROOM * span, True)
    return (
        low,
        high,
        f"observed over {seen} ({lo:.6g}..{hi:.6g}) plus {HEADROOM:.0%} headroom each side",
    )


def seen_range(stats: AttrStats, k: int | None) -> tuple[float, float]:
    """The smallest and largest value the probe saw (of element ``k``, or of all elements)."""
    assert stats.low is not None and stats.high is not None
    lo = float(stats.low.reshape(-1)[k] if k is not None else stats.low.min())
    hi = float(stats.high.reshape(-1)[k] if k is not None else stats.high.max())
    return lo, hi


def whole_numbers(stats: AttrStats, k: int | None) -> bool:
    """Every value of the attribute (element ``k``, or all elements) seen was a whole number."""
    if stats.integral is None:
        return False
    return bool(np.ravel(stats.integral)[k] if k is not None else np.all(stats.integral))


def _range(stats: AttrStats, k: int | None, dtype: str, probe: Probe) -> tuple[float, float, str]:
    lo, hi = seen_range(stats, k)
    space = probe.observation_space
    if stats.equals_obs and hasattr(space, "n"):
        start = int(getattr(space, "start", 0))
        return start, start + int(space.n) - 1, f"the observation space: Discrete({space.n})"
    integral = whole_numbers(stats, k)
    return range_note(lo, hi, dtype, f"{probe.episodes} random episodes", integral)


def _unique(name: str, taken: set[str]) -> str:
    name = name if name.isidentifier() and not keyword.iskeyword(name) else f"f_{name}"
    if name in RESERVED:
        name = f"{name}_"
    base, k = name, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


BODY_NAMES: dict[str, tuple[str, ...]] = {
    "position": ("x", "y"),
    "angle": ("angle",),
    "linearVelocity": ("vx", "vy"),
    "angularVelocity": ("angular_velocity",),
    "awake": ("awake",),
}
"""Field names (after the body's) for the members of a rigid body, per element."""
_BODY_MEMBER = re.compile(rf"^(.+)\.({'|'.join(BODY_MEMBERS)})$")
BODY_NOTES = {
    "position": "its position (written with the angle through SetTransform)",
    "angle": "its angle",
    "linearVelocity": "its linear velocity",
    "angularVelocity": "its angular velocity",
    "awake": "whether it is awake (a sleeping body does not move; written last: "
    "putting a body to sleep zeroes its velocities)",
}


def body_member(path: str) -> tuple[str, str] | None:
    """``(body path, member)`` for a rigid body's motion member (``legs[0].angle``)."""
    match = _BODY_MEMBER.match(path)
    return (match.group(1), match.group(2)) if match else None


def path_name(path: str, k: int | None = None) -> str:
    """A field name for an attribute path (and element): ``legs[0].position`` -> ``legs_0_x``."""
    member = body_member(path)
    if member is not None:
        body, what = member
        names = BODY_NAMES[what]
        suffix = names[k] if k is not None and k < len(names) else names[0]
        if k is not None and k >= len(names):
            suffix = f"{what}_{k}"
        return f"{path_name(body)}_{suffix}"
    name = re.sub(r"\W+", "_", path.lstrip("_")).strip("_") or "f"
    return name if k is None else f"{name}_{k}"


def _body_notes(path: str) -> list[str]:
    member = body_member(path)
    if member is None:
        return []
    body, what = member
    return [
        f"{body} is a rigid body (Box2D): {BODY_NOTES[what]}, read from the body and written "
        "back into the body of the freshly reset instance"
    ]


def _source_attr(path: str) -> str:
    """What the self-check leaves out as one piece: a body's motion members together."""
    member = body_member(path)
    return member[0] if member is not None else path


def seed_field(probe: Probe, rebuilt: list[str], taken: set[str]) -> FieldDraft:
    """The reset seed, for a reference whose reset builds objects no field carries."""
    return FieldDraft(
        _unique("seed", taken),
        "uint32",
        SEED,
        SEED,
        low=0,
        high=2**32 - 1,
        integral=True,
        notes=[
            f"GUESS: reset builds objects that change with the seed and are no numbers "
            f"({', '.join(rebuilt)}): the Driver resets the fresh instance with this seed "
            "before it writes the other fields, so they are built alike (a port keeps the "
            "seed, and rebuilds from it what reset builds or carries that as fields)",
            "range: every seed the verifier draws (uint32)",
        ],
    )


LIST_CAP = 2
"""A list's array holds this many times the longest list seen."""


def _padded_field(stats: AttrStats, probe: Probe, taken: set[str]) -> FieldDraft:
    """A list that changes length: a fixed array, then a sentinel no element took."""
    assert stats.low is not None and stats.high is not None
    lo, hi = float(stats.low), float(stats.high)
    dtype, dtype_note = spec_dtype(stats.dtype, lo, hi)
    pad = 0 if not lo <= 0 <= hi else lo - 1
    cap = max(4, LIST_CAP * stats.longest)
    return FieldDraft(
        _unique(stats.name.lstrip("_") or stats.name, taken),
        dtype,
        stats.name,
        stats.name,
        shape=(cap,),
        low=int(lo) if dtype != "float64" else lo,
        high=int(hi) if dtype != "float64" else hi,
        pad=pad,
        integral=whole_numbers(stats, None),
        seen=(lo, hi),
        notes=[
            f"{stats.name} is a list whose length changes (longest seen: {stats.longest}): "
            f"its elements, then pad = {pad:g} (no element took it) up to {cap} (GUESS: the "
            "most it can hold)",
            f"range: observed over {probe.episodes} random episodes: widen it to every valid "
            "element",
            *([dtype_note] if dtype_note else []),
        ],
    )


def draft_fields(
    probe: Probe, candidates: list[AttrStats], rebuilt: list[str] | None = None
) -> list[FieldDraft]:
    """Fields for the candidate attributes (in probe order), then the TimeLimit counter, then
    the reset seed if ``rebuilt`` names objects reset builds that no field carries."""
    taken: set[str] = set()
    out: list[FieldDraft] = []
    for stats in candidates:
        if stats.variable_list:
            out.append(_padded_field(stats, probe, taken))
            continue
        (shape,) = stats.shapes
        size = int(np.prod(shape)) if shape else 1
        lo_all = float(stats.low.min()) if stats.low is not None else 0.0
        hi_all = float(stats.high.max()) if stats.high is not None else 0.0
        dtype, dtype_note = spec_dtype(stats.dtype, lo_all, hi_all)
        dtype_notes = [dtype_note] if dtype_note else []
        if len(stats.dtypes_after_reset | stats.dtypes_after_step) > 1:
            dtype_notes.append(
                f"reset stores {'/'.join(stats.dtypes_after_reset)}, step stores "
                f"{'/'.join(stats.dtypes_after_step)}: the step's dtype"
            )
        where = "changes on steps" if stats.changed_on_step else "changes on resets only"
        if not stats.changes:  # a moving body's awake flag (probe.state_attributes)
            where = "never changed in the probe (GUESS: kept, a body at rest falls asleep)"
        body = _body_notes(stats.name)
        if shape and len(shape) == 1 and size <= PER_ELEMENT:
            names = element_names(probe.env_class, stats.name, size)
            for k in range(size):
                guessed = names.get(k)
                name = _unique(guessed or path_name(stats.name, k), taken)
                low, high, why = _range(stats, k, dtype, probe)
                how = (
                    f"name from the source ({guessed} = self.{stats.name}[{k}])"
                    if guessed
                    else "name made up: rename it"
                )
                out.append(
                    FieldDraft(
                        name,
                        dtype,
                        f"{stats.name}[{k}]",
                        _source_attr(stats.name),
                        index=k,
                        low=low,
                        high=high,
                        notes=[f"{stats.name} {where}", *body, how, f"range: {why}", *dtype_notes],
                        integral=whole_numbers(stats, k),
                        seen=seen_range(stats, k),
                    )
                )
            continue
        low, high, why = _range(stats, None, dtype, probe)
        out.append(
            FieldDraft(
                _unique(
                    path_name(stats.name)
                    if "." in stats.name
                    else stats.name.lstrip("_") or stats.name,
                    taken,
                ),
                dtype,
                stats.name,
                _source_attr(stats.name),
                shape=tuple(shape),
                low=low,
                high=high,
                notes=[f"{stats.name} {where}", *body, f"range: {why}", *dtype_notes],
                integral=whole_numbers(stats, None),
                seen=seen_range(stats, None),
            )
        )
    if probe.max_episode_steps is not None:
        out.append(
            FieldDraft(
                _unique("time", taken),
                "int32",
                ELAPSED_STEPS,
                ELAPSED_STEPS,
                low=0,
                high=probe.max_episode_steps,
                aliases=("_elapsed_steps",),
                notes=["the TimeLimit wrapper's step counter: it decides truncation"],
                integral=True,
                seen=(0, probe.max_episode_steps),
            )
        )
    if rebuilt:
        out.append(seed_field(probe, rebuilt, taken))
    return out
