"""Boundary search: states that sit exactly on one of the reference's branch thresholds.

Drawn float states almost never land exactly on a threshold (``ball_y + vy == 0``), so a port
that writes ``<=`` where the reference has ``<`` passes every sampled state. Along a line
through state space (one float field varied between two values, everything else fixed) the
reference's step jumps where a branch flips. Bisecting on whichever half shows the larger
change in the step's outputs narrows the line to two adjacent floats around a jump, one on
each side of the threshold; the threshold value itself is one of them whenever it is
representable. The parts of the line left and right of that jump are then bisected too, so a
smaller jump beside the one found (a paddle's far edge next to its near edge) is not
missed. Lines through states the reference actually reaches find the thresholds of
events that drawn states rarely set up (a ball level with a paddle that tracks it). Both drivers are then compared at those states like any other L1 state.

Used by L1 in exact mode (in tolerance mode the comparison excuses threshold flag flips by
design) and by ``envforge mutate``'s differential test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envforge.backends.base import Driver, State
from envforge.spec import EnvSpec
from envforge.verify.policies import random_actions
from envforge.verify.strategies import field_limits, sample_states

ROUNDS = 70
"""Enough halvings to reach adjacent float64 values from any interval."""


def ordered_keys(values: np.ndarray) -> np.ndarray:
    """Floats -> int64 keys in the same order, adjacent floats differing by exactly 1."""
    bits = np.int64 if values.dtype == np.float64 else np.int32
    i = values.view(bits).astype(np.int64)
    low = np.int64(np.iinfo(bits).min)
    return np.where(i < 0, low - i, i)


def from_keys(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    bits = np.int64 if dtype == np.float64 else np.int32
    low = np.int64(np.iinfo(bits).min)
    raw = np.where(keys < 0, low - keys, keys).astype(bits)
    return raw.view(dtype)


def _scales(spec: EnvSpec) -> dict[str, np.ndarray]:
    """Per field, its range width per element (flattened), at least 1e-12."""
    out = {}
    for f in spec.state:
        lo, hi = field_limits(f)
        width = np.broadcast_to(np.asarray(hi, np.float64) - lo, f.shape).reshape(-1)
        out[f.name] = np.maximum(width, 1e-12)
    return out


def signature(spec: EnvSpec, driver: Driver, state: State, actions: np.ndarray) -> np.ndarray:
    """A step's outputs as one scaled float64 row per env (fields over their range widths)."""
    tr = driver.step(state, actions)
    scales = _scales(spec)
    parts = [
        tr.state[f.name].reshape(len(actions), -1).astype(np.float64) / scales[f.name]
        for f in spec.state
    ]
    parts += [
        tr.obs.reshape(len(actions), -1).astype(np.float64),
        tr.reward.reshape(-1, 1),
        tr.terminated.reshape(-1, 1).astype(np.float64),
        tr.truncated.reshape(-1, 1).astype(np.float64),
    ]
    return np.nan_to_num(np.concatenate(parts, axis=1), nan=1e6, posinf=1e6, neginf=-1e6)


@dataclass
class Lines:
    """``n`` lines: a base state, the varied field and element, and the interval's end keys."""

    base: State
    actions: np.ndarray
    field: list[str]
    element: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def at(self, spec: EnvSpec, keys: np.ndarray) -> State:
        state = {k: v.copy() for k, v in self.base.items()}
        for name in set(self.field):
            rows = np.flatnonzero(np.array(self.field) == name)
            dtype = spec.field(name).np_dtype
            flat = state[name].reshape(len(keys), -1)
            flat[rows, self.element[rows]] = from_keys(keys[rows], dtype)
            state[name] = flat.reshape(state[name].shape)
        return state


def draw_lines(
    spec: EnvSpec, rng: np.random.Generator, n: int, bases: State | None = None
) -> Lines | None:
    floats = [f for f in spec.state if f.np_dtype.kind == "f"]
    if not floats:
        return None
    base = sample_states(spec, rng, n)
    if bases:  # lines through given states (e.g. reached by the reference) for the first rows
        k = min(n, len(next(iter(bases.values()))))
        for name in base:
            base[name][:k] = bases[name][:k]
    other = sample_states(spec, rng, n)
    chosen = rng.integers(0, len(floats), n)
    names = [floats[c].name for c in chosen]
    element = np.array([rng.integers(0, max(1, int(np.prod(floats[c].shape)))) for c in chosen])
    a = np.zeros(n, np.int64)
    b = np.zeros(n, np.int64)
    for i, name in enumerate(names):
        x = base[name].reshape(n, -1)[i, element[i]]
        y = other[name].reshape(n, -1)[i, element[i]]
        if rng.random() < 0.5:  # half the lines: a narrow interval around the base value
            f = spec.field(name)
            lo, hi = (np.broadcast_to(v, f.shape).reshape(-1)[element[i]] for v in field_limits(f))
            y = np.clip(x + (y - x) * 10.0 ** rng.uniform(-4, 0), lo, hi).astype(x.dtype)
        ka, kb = ordered_keys(np.array([x, y]))
        a[i], b[i] = min(ka, kb), max(ka, kb)
    return Lines(base, random_actions(spec, rng, n), names, element, a, b)


def _bisect(
    spec: EnvSpec, driver: Driver, lines: Lines, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Narrow each line's ``[lo, hi]`` (keys) to two adjacent floats around one jump, halving
    towards the larger change in ``driver``'s step. Empty intervals (``hi <= lo``) stay put."""
    lo, hi = lo.copy(), np.maximum(hi, lo)
    y_lo = signature(spec, driver, lines.at(spec, lo), lines.actions)
    y_hi = signature(spec, driver, lines.at(spec, hi), lines.actions)
    for _ in range(ROUNDS):
        active = hi - lo > 1
        if not active.any():
            break
        mid = np.where(active, lo + (hi - lo) // 2, lo)
        y_mid = signature(spec, driver, lines.at(spec, mid), lines.actions)
        left = np.abs(y_mid - y_lo).max(axis=1) >= np.abs(y_hi - y_mid).max(axis=1)
        take_left = active & left
        take_right = active & ~left
        hi = np.where(take_left, mid, hi)
        y_hi = np.where(take_left[:, None], y_mid, y_hi)
        lo = np.where(take_right, mid, lo)
        y_lo = np.where(take_right[:, None], y_mid, y_lo)
    return lo, hi


def boundary_states(
    spec: EnvSpec,
    driver: Driver,
    rng: np.random.Generator,
    n: int,
    bases: State | None = None,
    jumps: int = 3,
) -> tuple[State, np.ndarray]:
    """Pairs of adjacent floats around jumps of ``driver``'s step, and their actions.

    Each of the ``n`` lines is bisected to one jump (always halving towards the larger change);
    with ``jumps=3`` the parts of the line left and right of that jump are bisected too, so a smaller jump beside a larger one
    (a paddle's far edge beside its near edge, beside a point) is found as well: up to
    ``2 * jumps * n`` states. ``bases``: states the first lines pass through (the rest pass
    through drawn states)."""
    lines = draw_lines(spec, rng, n, bases)
    if lines is None:
        return {}, np.zeros(0)
    return jump_states(spec, driver, lines, jumps)


def jump_states(
    spec: EnvSpec, driver: Driver, lines: Lines, jumps: int = 3
) -> tuple[State, np.ndarray]:
    """:func:`boundary_states` for given lines."""
    lo, hi = _bisect(spec, driver, lines, lines.lo, lines.hi)
    found = [(lo, hi)]
    if jumps >= 2:
        found.append(_bisect(spec, driver, lines, lines.lo, lo))
    if jumps >= 3:
        found.append(_bisect(spec, driver, lines, hi, lines.hi))
    below = [lines.at(spec, a) for a, b in found]
    above = [lines.at(spec, b) for a, b in found]
    states = {k: np.concatenate([s[k] for s in below + above]) for k in below[0]}
    return states, np.concatenate([lines.actions] * (2 * len(found)))
