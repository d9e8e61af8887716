"""Drawing canonical states and actions: hypothesis strategies and fast batched sampling.

Both respect the spec's ranges and over-weight the boundaries (low, high, zero, and for
integers low + 1 and high - 1), where ports most often go wrong (off-by-one comparisons,
clips, wraps). A padded list field (``pad``) is drawn as 1 to half its capacity items
followed by the sentinel, so that the steps from it have room to grow the list.

Fields of more than ``SPARSE_OVER`` elements (memory, framebuffers) are drawn by hypothesis as
one fill value plus up to ``SPARSE_WRITES`` single elements set (shrinking to few changes; a
list of thousands of elements would overrun hypothesis' buffer). A spec's ``[verify] constrain``
function then maps every drawn batch to valid states, and its ``valid`` predicate (a state the
reference can be in) filters what remains: hypothesis filters its examples, the batched sampler
rejects and redraws (see docs/SPEC.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st

from envforge.backends.base import State
from envforge.errors import BadInput
from envforge.spec import EnvSpec
from envforge.spec.tables import StateField

DEFAULT_FLOAT_SPAN = 1e3  # fields with no declared range
BOUNDARY_P = 0.1
SPARSE_OVER = 256
SPARSE_WRITES = 24
_HOOKS: dict[str, Callable[..., Any]] = {}


def field_limits(f: StateField) -> tuple[Any, Any]:
    """(low, high) to draw from: floats, or arrays of the field's shape when the spec gives a
    range per element (an array field's joint limits)."""
    info_lo, info_hi = -DEFAULT_FLOAT_SPAN, DEFAULT_FLOAT_SPAN
    if f.np_dtype.kind in "iu":
        ii = np.iinfo(f.np_dtype)
        info_lo, info_hi = float(ii.min), float(ii.max)
    if f.np_dtype.kind == "b":
        return 0.0, 1.0
    return f.limits(info_lo, info_hi)


def field_strategy(f: StateField) -> st.SearchStrategy[Any]:
    lo, hi = field_limits(f)
    if np.ndim(lo) or np.ndim(hi):  # a range per element: each element drawn from its own
        lows = np.broadcast_to(lo, f.shape).reshape(-1)
        highs = np.broadcast_to(hi, f.shape).reshape(-1)
        elements = [
            _scalar_strategy(f, float(a), float(b)) for a, b in zip(lows, highs, strict=True)
        ]
        return st.tuples(*elements).map(
            lambda xs: np.asarray(xs, dtype=f.np_dtype).reshape(f.shape)
        )
    scalar = _scalar_strategy(f, float(lo), float(hi))
    if not f.shape:
        return scalar
    size = int(np.prod(f.shape))
    if f.pad is not None:
        pad = f.pad
        return st.lists(scalar, min_size=1, max_size=max(1, size // 2)).map(
            lambda xs: np.asarray(xs + [pad] * (size - len(xs)), dtype=f.np_dtype).reshape(f.shape)
        )
    if size > SPARSE_OVER:
        writes = st.lists(st.tuples(st.integers(0, size - 1), scalar), max_size=SPARSE_WRITES)
        return st.tuples(scalar, writes).map(lambda fw: _sparse(f, size, *fw))
    return st.lists(scalar, min_size=size, max_size=size).map(
        lambda xs: np.asarray(xs, dtype=f.np_dtype).reshape(f.shape)
    )


def _scalar_strategy(f: StateField, lo: float, hi: float) -> st.SearchStrategy[Any]:
    """One element of field ``f`` in ``[lo, hi]``, its ends over-weighted."""
    if f.np_dtype.kind == "b":
        scalar: st.SearchStrategy[Any] = st.booleans()
    elif f.np_dtype.kind in "iu":
        ilo, ihi = int(np.ceil(lo)), int(np.floor(hi))
        # the ends and their neighbours: a counter one step from its limit is where an
        # off-by-one (>= vs >, MAX vs MAX - 1) shows, and a uniform draw almost never lands there
        edges = sorted({v for v in (ilo, ilo + 1, ihi - 1, ihi) if ilo <= v <= ihi})
        scalar = st.one_of(st.sampled_from(edges), st.integers(ilo, ihi))
    else:
        width: Literal[32, 64] = 32 if f.np_dtype == np.float32 else 64
        lo32, hi32 = (float(np.float32(lo)), float(np.float32(hi))) if width == 32 else (lo, hi)
        lo32 = lo32 if lo32 >= lo else float(np.nextafter(np.float32(lo32), np.float32(np.inf)))
        hi32 = hi32 if hi32 <= hi else float(np.nextafter(np.float32(hi32), np.float32(-np.inf)))
        scalar = st.floats(lo32, hi32, width=width, allow_nan=False, allow_infinity=False)
    return scalar


def _sparse(f: StateField, size: int, fill: Any, writes: list[tuple[int, Any]]) -> np.ndarray:
    flat = np.full(size, fill, dtype=f.np_dtype)
    for index, value in writes:
        flat[index] = value
    return flat.reshape(f.shape)


def spec_function(spec: EnvSpec, key: str) -> Callable[..., Any] | None:
    """The spec's ``[verify] <key>`` function (``file.py:function``), loaded once."""
    target = getattr(spec.verify, key)
    if target is None:
        return None
    path_text, _, name = target.rpartition(":")
    path = Path(path_text) if Path(path_text).is_absolute() else spec.root / path_text
    cache_key = f"{path.resolve()}:{name}"
    if cache_key not in _HOOKS:
        from envforge.backends.jax import load_module
        from envforge.errors import BadInput

        if not path.is_file():
            raise BadInput(f"{spec.name}: [verify] {key}: no file {path}")
        function = getattr(load_module(path), name, None)
        if not callable(function):
            raise BadInput(f"{spec.name}: [verify] {key}: {path} has no function {name!r}")
        _HOOKS[cache_key] = function
    return _HOOKS[cache_key]


def constrained(spec: EnvSpec, state: State) -> State:
    """``state`` made valid by the spec's constraint (unchanged without one), spec dtypes kept."""
    function = spec_function(spec, "constrain")
    if function is None:
        return state
    out = function({k: v.copy() for k, v in state.items()})
    return {f.name: np.asarray(out[f.name], dtype=f.np_dtype) for f in spec.state}


def action_strategy(spec: EnvSpec) -> st.SearchStrategy[Any]:
    if spec.action.type == "discrete":
        assert spec.action.n is not None
        return st.integers(0, spec.action.n - 1)
    low, high = spec.action.bounds()
    size = int(np.prod(spec.action.shape or (1,)))
    lo, hi = _widened(float(np.min(low)), float(np.max(high)))
    return st.lists(st.floats(lo, hi, width=32, allow_nan=False), min_size=size, max_size=size).map(
        lambda xs: np.asarray(xs, np.float32).reshape(spec.action.shape)
    )


def _widened(lo: float, hi: float) -> tuple[float, float]:
    """Continuous actions are drawn up to one range-width outside the bounds: agents emit
    unclipped actions, and references differ in where (and whether) they clip them."""
    span = hi - lo
    return lo - span, hi + span


def sample_actions(spec: EnvSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random actions; for continuous spaces a third of them lie outside the bounds."""
    if spec.action.type == "discrete":
        assert spec.action.n is not None
        return rng.integers(0, spec.action.n, size=n).astype(np.int32)
    low, high = spec.action.bounds()
    wide_lo, wide_hi = _widened(float(np.min(low)), float(np.max(high)))
    inside = rng.uniform(low, high, size=(n, *spec.action.shape))
    outside = rng.uniform(wide_lo, wide_hi, size=(n, *spec.action.shape))
    pick = (rng.random(n) < 1 / 3).reshape((n,) + (1,) * len(spec.action.shape))
    return np.where(pick, outside, inside).astype(np.float32)


def step_outputs(spec: EnvSpec) -> tuple[str, ...]:
    """Fields a step reports rather than reads (several agents' rewards, flags and masks):
    drawn states hold zeros there, as a state between two steps does."""
    return spec.agents.outputs if spec.agents is not None else ()


def state_strategy(spec: EnvSpec) -> st.SearchStrategy[dict[str, Any]]:
    outputs = step_outputs(spec)
    rows = st.fixed_dictionaries(
        {
            f.name: st.just(np.zeros(f.shape, f.np_dtype))
            if f.name in outputs
            else field_strategy(f)
            for f in spec.state
        }
    )
    if spec.valid is None:
        return rows
    return rows.filter(lambda row: bool(spec.valid_mask(stack_states(spec, [row]))[0]))


def stack_states(spec: EnvSpec, rows: list[dict[str, Any]]) -> State:
    state = {
        f.name: np.asarray([r[f.name] for r in rows], dtype=f.np_dtype).reshape(len(rows), *f.shape)
        for f in spec.state
    }
    return constrained(spec, state)


def stack_actions(spec: EnvSpec, actions: list[Any]) -> np.ndarray:
    dtype = spec.action.dtype
    return np.asarray(actions, dtype=dtype).reshape(len(actions), *spec.action.shape)


def _edges(f: StateField, lo: Any, hi: Any, rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """A boundary value for every element: its low or high end, 0 where inside its range, and
    for integers the ends' off-by-one neighbours (per element when ranges are)."""
    if not np.ndim(lo) and not np.ndim(hi):  # one range for the whole field
        edges = np.array([lo, hi] + ([0.0] if lo <= 0.0 <= hi else []))
        if f.np_dtype.kind in "iu" and hi - lo >= 2:
            edges = np.concatenate([edges, [lo + 1, hi - 1]])  # off-by-one neighbours
        return rng.choice(edges, size=shape)
    lo_b, hi_b = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
    inside = (lo_b <= 0.0) & (hi_b >= 0.0)
    candidates = [lo_b, hi_b, np.where(inside, 0.0, lo_b)]
    if f.np_dtype.kind in "iu":
        wide = hi_b - lo_b >= 2
        candidates += [np.where(wide, lo_b + 1, lo_b), np.where(wide, hi_b - 1, hi_b)]
    stacked = np.stack(candidates)
    which = rng.integers(0, len(candidates), size=shape)
    return np.take_along_axis(stacked, which[None], axis=0)[0]


VALID_TRIES = 16
VALID_RARE = 1e-3
"""Below this share of valid draws (after a few tries) a spec's ranges are too wide for it."""


def sample_states(spec: EnvSpec, rng: np.random.Generator, n: int) -> State:
    """Uniform states inside the ranges, each value replaced by a boundary with prob 0.1; with a
    spec's ``valid`` predicate, only states that satisfy it (drawn by rejection, each round
    sized by the share of valid draws so far)."""
    if spec.valid is None:
        return _sample_in_ranges(spec, rng, n)
    kept: list[State] = []
    have = drawn = 0
    for attempt in range(VALID_TRIES):
        rate = (have + 1) / (drawn + 1)
        if attempt >= 4 and rate < VALID_RARE:
            break
        size = int(min(max(64, 1.25 * (n - have) / rate), 1 << 20))
        batch = _sample_in_ranges(spec, rng, size)
        ok = spec.valid_mask(batch)
        kept.append({k: v[ok] for k, v in batch.items()})
        have += int(ok.sum())
        drawn += size
        if have >= n:
            return {k: np.concatenate([s[k] for s in kept])[:n] for k in batch}
    raise BadInput(
        f"{spec.name}: the spec's valid predicate held for only {have} of {drawn} states drawn "
        "in its ranges; narrow the ranges so that valid states are not rare"
    )


def _sample_in_ranges(spec: EnvSpec, rng: np.random.Generator, n: int) -> State:
    out: State = {}
    for f in spec.state:
        lo, hi = field_limits(f)
        shape = (n, *f.shape)
        values: np.ndarray
        if f.np_dtype.kind == "b":
            values = rng.random(shape) < 0.5
        elif f.np_dtype.kind in "iu":
            values = rng.integers(
                np.ceil(lo).astype(np.int64),
                np.floor(hi).astype(np.int64),
                size=shape,
                endpoint=True,
                dtype=np.int64,
            )
        else:
            values = rng.uniform(lo, hi, size=shape)
        pick = rng.random(shape) < BOUNDARY_P
        values = np.where(pick, _edges(f, lo, hi, rng, shape), values)
        if f.pad is not None and f.shape:
            size = int(np.prod(f.shape))
            lengths = rng.integers(1, max(1, size // 2), size=n, endpoint=True)
            flat = values.reshape(n, size)
            flat[np.arange(size)[None, :] >= lengths[:, None]] = f.pad
            values = flat.reshape(shape)
        out[f.name] = values.astype(f.np_dtype)
    for name in step_outputs(spec):
        out[name] = np.zeros_like(out[name])
    return constrained(spec, out)
