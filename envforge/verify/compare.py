"""The one comparison routine: field by field, exact or within the spec's tolerances."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.base import State, Transition
from envforge.spec import EnvSpec
from envforge.spec.tables import StateField

FLAGS = ("terminated", "truncated")


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between two float arrays of the same dtype (0 for equal values)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype != b.dtype or a.dtype.kind != "f":
        dtype = np.result_type(a, b, np.float32)
        a, b = a.astype(dtype), b.astype(dtype)
    int_type: Any = {4: np.int32, 8: np.int64, 2: np.int16}[a.dtype.itemsize]

    def ordered(x: np.ndarray) -> np.ndarray:
        i = x.view(int_type).astype(np.int64)
        return np.where(i < 0, np.int64(np.iinfo(int_type).min) - i, i)

    dist = np.abs(ordered(a) - ordered(b)).astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, 0.0, dist)


def values_close(a: np.ndarray, b: np.ndarray, atol: Any, rtol: Any) -> np.ndarray:
    """Elementwise agreement; ``a`` is the reference. NaN equals NaN; ints/bools must be equal.
    ``atol``/``rtol`` are scalars or per-element arrays (broadcast over the batch)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return np.asarray(a == b, dtype=bool)
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    with np.errstate(invalid="ignore"):
        if not np.any(atol) and not np.any(rtol):
            close = a64 == b64
        else:
            close = np.abs(a64 - b64) <= atol + rtol * np.abs(a64)
    return np.asarray(close | both_nan, dtype=bool)


def as_float32_can_hold(ref: np.ndarray, port: np.ndarray) -> np.ndarray:
    """Elementwise, in exact mode: the port's value is a float32 and the one nearest the
    reference's float64 (MiniGrid's reward ``1 - 0.9 * t / max_steps``): as exact as a float32
    port can be. Any other float32 still differs."""
    a, b = np.asarray(ref), np.asarray(port)
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        return np.zeros(np.broadcast_shapes(a.shape, b.shape), dtype=bool)
    b64 = b.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        b32 = b64.astype(np.float32)
        held = (b32.astype(np.float64) == b64) & (a.astype(np.float32) == b32)
    return np.asarray(held, dtype=bool)


def not_float32(value: Any) -> str | None:
    """Why a reference value cannot be matched bit for bit by a float32 port, or None."""
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if not len(v) or not np.all(np.isfinite(v)):
        return None
    with np.errstate(over="ignore"):
        nearest = v.astype(np.float32)
    bad = np.flatnonzero(nearest.astype(np.float64) != v)
    if not len(bad):
        return None
    j = int(bad[0])
    return (
        f"expected {v[j]!r} is not representable in float32 (the nearest float32 is "
        f"{float(nearest[j])!r}, which exact mode accepts from a float32 port)"
    )


def _per_env(mask: np.ndarray) -> np.ndarray:
    """Reduce an elementwise ``[B, ...]`` mask to ``[B]`` (all elements close)."""
    return np.asarray(mask.reshape(mask.shape[0], -1).all(axis=1) if mask.ndim > 1 else mask)


def _abs_err(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    err = np.where(
        np.isnan(err)
        & ~(np.isnan(np.asarray(a, np.float64)) & np.isnan(np.asarray(b, np.float64))),
        np.inf,
        err,
    )
    err = np.nan_to_num(err, nan=0.0)
    return err.reshape(err.shape[0], -1).max(axis=1) if err.ndim > 1 else err


def _element_err(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element of an array field, the largest absolute error over the batch."""
    with np.errstate(invalid="ignore", over="ignore"):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        err = np.abs(a64 - b64)
    err = np.where(np.isnan(err) & ~(np.isnan(a64) & np.isnan(b64)), np.inf, err)
    return np.asarray(np.nan_to_num(err, nan=0.0).max(axis=0))


def first_element_out(f: StateField, a: np.ndarray, b: np.ndarray, atol: Any, rtol: Any) -> int:
    """Flat index of the first element of one env's array field outside the tolerance (the
    first that differs at all if none is: exact comparison)."""
    a, b = np.asarray(a), np.asarray(b)
    if f.period is not None:
        b = nearest_equivalent(a, b, f.period)
    out = np.flatnonzero(~values_close(a, b, atol, rtol).reshape(-1))
    if not len(out):
        out = np.flatnonzero(~values_close(a, b, 0.0, 0.0).reshape(-1))
    return int(out[0]) if len(out) else 0


def nearest_equivalent(a: np.ndarray, b: np.ndarray, period: float) -> np.ndarray:
    """``b`` shifted by whole periods to lie nearest ``a`` (angles wrapped on different sides)."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    shifted = a64 + np.mod(b64 - a64 + period / 2, period) - period / 2
    return np.where(np.isfinite(shifted), shifted, b64)


def _wrapped_in_range(f: StateField, ref: np.ndarray, port: np.ndarray, atol: Any) -> np.ndarray:
    """A period excuses which end of the range an angle sits at (+pi against -pi), not a port
    that leaves the range the reference wraps into (3.3 where the reference has 3.3 - 2 pi: the
    same angle, but a state outside the spec's): elementwise, the port's value lies in [low,
    high] (within ``atol``) wherever the reference's does."""
    lo, hi = f.limits(-np.inf, np.inf)
    a, b = np.asarray(ref, dtype=np.float64), np.asarray(port, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ref_inside = (a >= lo) & (a <= hi)
        port_inside = (b >= lo - atol) & (b <= hi + atol)
    return np.asarray(port_inside | ~ref_inside, dtype=bool)


@dataclass
class Diff:
    """Per-env comparison of two batches. ``ok[k]`` is ``[B]``: key k agrees for that env."""

    ok: dict[str, np.ndarray]
    abs_err: dict[str, np.ndarray]
    ulp: dict[str, np.ndarray]
    excused: np.ndarray
    """Envs whose flag mismatch sits on a float threshold (both flags follow from their states)."""
    element_err: dict[str, np.ndarray] = field(default_factory=dict)
    """Array fields: the largest absolute error of each element over the batch (field shape)."""

    @property
    def mismatch(self) -> np.ndarray:
        bad = np.zeros_like(self.excused)
        for ok in self.ok.values():
            bad |= ~ok
        return bad

    def keys_at(self, i: int) -> list[str]:
        return [k for k, ok in self.ok.items() if not ok[i]]

    def first(self) -> int | None:
        idx = np.flatnonzero(self.mismatch)
        return int(idx[0]) if len(idx) else None


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """The same bits: every comparison below agrees with no error (L3 compares thousands of
    batches that match; the full comparison was a quarter of its time)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _agree(
    f: StateField,
    a: np.ndarray,
    ok: dict[str, np.ndarray],
    abs_err: dict[str, np.ndarray],
    ulp: dict[str, np.ndarray],
    element_err: dict[str, np.ndarray],
) -> None:
    """What :func:`compare_states` records for a field whose two sides are identical."""
    a = np.asarray(a)
    batch = a.shape[0] if a.ndim else 1
    ok[f.name] = np.ones(batch, dtype=bool)
    abs_err[f.name] = np.zeros(batch)
    if f.shape and len(a) and a.dtype.kind == "f":
        element_err[f.name] = np.zeros(a.shape[1:])
    if a.dtype.kind == "f":
        ulp[f.name] = np.zeros(batch)


def compare_states(spec: EnvSpec, ref: State, port: State, exact: bool = False) -> Diff:
    """Field-wise comparison of two canonical states (``exact`` ignores the spec tolerances)."""
    ok: dict[str, np.ndarray] = {}
    abs_err: dict[str, np.ndarray] = {}
    ulp: dict[str, np.ndarray] = {}
    element_err: dict[str, np.ndarray] = {}
    for f in spec.state:
        atol, rtol = (0.0, 0.0) if exact else spec.tolerance(f.name)
        a, b = ref[f.name], port[f.name]
        if _identical(a, b):
            _agree(f, a, ok, abs_err, ulp, element_err)
            continue
        if f.period is not None and not exact:
            in_range = _wrapped_in_range(f, a, b, atol)
            b = nearest_equivalent(a, b, f.period)
            ok[f.name] = _per_env(values_close(a, b, atol, rtol) & in_range)
        else:
            ok[f.name] = _per_env(values_close(a, b, atol, rtol))
        abs_err[f.name] = _abs_err(a, b)
        if f.shape and len(a) and a.dtype.kind == "f":
            element_err[f.name] = _element_err(a, b)
        if a.dtype.kind == "f":
            u = ulp_distance(a, b)
            ulp[f.name] = u.reshape(u.shape[0], -1).max(axis=1) if u.ndim > 1 else u
    batch = len(next(iter(ref.values())))
    return Diff(
        ok=ok,
        abs_err=abs_err,
        ulp=ulp,
        excused=np.zeros(batch, dtype=bool),
        element_err=element_err,
    )


def compare_transitions(
    spec: EnvSpec,
    ref: Transition,
    port: Transition,
    state_before: State | None = None,
    actions: np.ndarray | None = None,
) -> Diff:
    """Compare next states, observations, rewards and flags of two batched transitions."""
    diff = compare_states(spec, ref.state, port.state)
    atol, rtol = spec.tolerance(None)
    for key, a, b in (("obs", ref.obs, port.obs), ("reward", ref.reward, port.reward)):
        if _identical(a, b):
            batch = len(a)
            diff.ok[key], diff.abs_err[key] = np.ones(batch, dtype=bool), np.zeros(batch)
        else:
            close = values_close(a, b, atol, rtol)
            if not np.any(atol) and not np.any(rtol):
                close |= as_float32_can_hold(a, b)
            diff.ok[key] = _per_env(close)
            diff.abs_err[key] = _abs_err(a, b)
    for flag in FLAGS:
        diff.ok[flag] = np.asarray(getattr(ref, flag) == getattr(port, flag))
        diff.abs_err[flag] = (~diff.ok[flag]).astype(np.float64)
    _excuse_threshold_flags(spec, ref, port, diff, state_before, actions)
    return diff


def follows_termination(
    spec: EnvSpec,
    before: State,
    actions: np.ndarray | None,
    tr: Transition,
    truncated: np.ndarray | None = None,
    within_tolerance: bool = False,
) -> np.ndarray:
    """Per env: ``tr.terminated`` is what the spec's termination predicate says of ``tr``'s own
    next state (``truncated``: the flag the predicate reads, if not ``tr``'s own).

    ``within_tolerance``: or of that state with one float field moved by its tolerance either
    way. In tolerance mode states within tolerance are the same state, so within tolerance of
    a threshold either flag is right: a float32 port compares with the float32 threshold
    (``x > 2.4f``), which is not the float64 one the spec's predicate reads."""
    if spec.termination is None:
        return np.zeros(len(tr.terminated), dtype=bool)
    predicate = spec.expression(spec.termination)

    def follows(state: State) -> np.ndarray:
        moved = Transition(state, tr.obs, tr.reward, tr.terminated, tr.truncated)
        inputs = moved.expression_inputs(before, actions)
        if truncated is not None:
            inputs["truncated"] = truncated
        value = predicate(**inputs)
        return np.broadcast_to(np.asarray(value, dtype=bool), tr.terminated.shape) == tr.terminated

    out = follows(tr.state)
    if not within_tolerance:
        return out
    for f in spec.state:
        atol, rtol = spec.tolerance(f.name)
        value = tr.state[f.name]
        if value.dtype.kind != "f" or (not np.any(atol) and not np.any(rtol)):
            continue
        delta = atol + rtol * np.abs(value)
        for sign in (-1.0, 1.0):
            out = out | follows({**tr.state, f.name: value + sign * delta})
    return out


def _excuse_threshold_flags(
    spec: EnvSpec,
    ref: Transition,
    port: Transition,
    diff: Diff,
    state_before: State | None,
    actions: np.ndarray | None,
) -> None:
    """In tolerance mode, a terminated flag may flip when the deciding value rounds across the
    threshold. Excuse it only when the states agree within tolerance, the reference's flag is
    what the spec's termination predicate says of its next state, and the port's flag is what
    the predicate says of its next state or of a state within tolerance of it."""
    if spec.compare.mode != "tolerance" or spec.termination is None:
        return
    flipped = ~diff.ok["terminated"]
    if not flipped.any():
        return
    state_ok = np.ones_like(flipped)
    for f in spec.field_names:
        state_ok &= diff.ok[f]
    before = state_before if state_before is not None else ref.state
    consistent = follows_termination(spec, before, actions, ref) & follows_termination(
        spec, before, actions, port, truncated=ref.truncated, within_tolerance=True
    )
    excused = flipped & state_ok & consistent
    if excused.any():
        diff.excused |= excused
        diff.ok["terminated"] = diff.ok["terminated"] | excused
        # observations/rewards computed from a flipped flag may legitimately differ too
        diff.ok["reward"] = diff.ok["reward"] | excused
