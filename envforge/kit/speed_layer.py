"""The speed layer of envforge's hand-written JAX ports: XLA:CPU tricks kept out of the physics.

A port's physics reads like gymnax: the reference's names, its operation order, nothing else.
What XLA:CPU needs to run it fast lives here, and a port calls it on one marked line
(``speed_layer.settle_flags(...)``). Switched off, every helper is the plain computation, so a
port can be read, debugged and verified without the layer::

    ENVFORGE_SPEED_LAYER=off envforge verify pong --levels 0,1

The switch is read when a port is traced (jitted), so it reaches the verifier's sandboxed
driver (``ENVFORGE_*`` variables pass into the sandbox) and ``envforge bench --speed-layer
on,off`` measures both positions in one run (:func:`switched`). A function jitted once keeps
the position it was traced with (``jax.jit`` caches by function and argument shapes, not by this
switch): switch before the first call, or jit a new function. ``docs/SPEED_LAYER.md`` has the
measured gain.

Why the tricks: XLA:CPU copies cheap element-wise work into every consumer instead of storing
it. A pong frame's collision decisions feed all ten state fields, the observation, the reward
and the flags, so unsettled, each output redoes the collision logic of every earlier frame of
the step. An integer remainder is an operation XLA never copies that way: passing a value
through an identity built on a remainder makes XLA compute it once for the batch and store it.

What switching off changes:

* :func:`settle_flags` and :func:`settle_floats` return the same bits either way (every float32
  pattern, infinities, signed zeros and denormals included; a NaN stays a NaN), so a port stays
  bit-identical to its reference with the layer off.
* :func:`flag_lookup` returns the same values either way (packed bits on, a gather off).
* :func:`sincos` is a vectorized polynomial: off, it is ``jnp.sin``/``jnp.cos``, which differ
  from it by about one float32 ulp. Use it only where the spec compares within a tolerance.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

SWITCH_VARIABLE = "ENVFORGE_SPEED_LAYER"
"""``off`` (or ``0``, ``false``, ``no``) switches the layer off; ``on``, ``1`` or unset: on."""

_OFF = ("off", "0", "false", "no")
_ON = ("on", "1", "true", "yes", "")
_forced: ContextVar[bool | None] = ContextVar("speed_layer_forced", default=None)


def enabled() -> bool:
    """Whether the layer is on: :func:`switched` when inside it, else ``ENVFORGE_SPEED_LAYER``."""
    forced = _forced.get()
    if forced is not None:
        return forced
    value = os.environ.get(SWITCH_VARIABLE, "on").strip().lower()
    if value not in _OFF + _ON:
        raise ValueError(f"{SWITCH_VARIABLE}={value!r}: expected on or off")
    return value not in _OFF


@contextmanager
def switched(on: bool) -> Iterator[None]:
    """The layer on or off for ports traced inside this block, whatever the environment says."""
    token = _forced.set(on)
    try:
        yield
    finally:
        _forced.reset(token)


# ---- fusion barriers: the same values, computed once for the batch ----------------------------


def settle_flags(*flags: jax.Array) -> tuple[jax.Array, ...]:
    """The same boolean flags (at most 7), computed once for the whole batch and stored.

    Packed into bits, taken modulo 255 (an identity on codes below 128) and unpacked."""
    if len(flags) > 7:
        raise ValueError(f"settle_flags takes at most 7 flags, got {len(flags)}")
    if not enabled():
        return flags
    code = jnp.uint32(0)
    for i, flag in enumerate(flags):
        code = code | jnp.where(flag, jnp.uint32(1 << i), jnp.uint32(0))
    code = code % jnp.uint32(255)
    return tuple((code & jnp.uint32(1 << i)) != 0 for i in range(len(flags)))


_ALL_ONES = np.uint32(0xFFFFFFFF)
_SHIFT = np.uint32(0x80000001)


def _pin(value: jax.Array) -> jax.Array:
    """One float32 array, computed once and stored: its bits, shifted by ``_SHIFT`` (wrapping),
    are taken ``% 0xFFFFFFFF`` and shifted back. The remainder is an identity on every pattern
    but the one the shift maps to all-ones, the NaN 0x7FFFFFFE, which comes back as 0x7FFFFFFF,
    another NaN (checked over all 2^32 patterns)."""
    bits = jax.lax.bitcast_convert_type(value, jnp.uint32)
    return jax.lax.bitcast_convert_type((bits + _SHIFT) % _ALL_ONES - _SHIFT, jnp.float32)


def settle_floats(tree: Any) -> Any:
    """The same pytree, each float32 leaf computed once for the whole batch and stored (other
    leaves unchanged). Pong calls it on its state at the end of every frame, so the four frames
    of a step are not redone inside each output."""
    if not enabled():
        return tree
    return jax.tree_util.tree_map(
        lambda leaf: _pin(leaf) if jnp.asarray(leaf).dtype == jnp.float32 else leaf, tree
    )


# ---- sincos: vectorized, within one ulp of jnp.sin/jnp.cos ------------------------------------

_TWO_OVER_PI = np.float32(2 / math.pi)
_PIO2 = (
    np.float32(1.5703125),
    np.float32(4.837512969970703125e-4),
    np.float32(7.54978995489188216e-8),
)
"""pi/2 in three float32 parts (Cody-Waite): ``k * part`` is exact for the first two."""
_SIN = (np.float32(-1.9515295891e-4), np.float32(8.3321608736e-3), np.float32(-1.6666654611e-1))
_COS = (
    np.float32(2.443315711809948e-5),
    np.float32(-1.388731625493765e-3),
    np.float32(4.166664568298827e-2),
)
"""Minimax polynomial coefficients for float32 sin and cos on [-pi/4, pi/4] (Cephes sinf/cosf)."""


def sincos(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """float32 ``(sin(x), cos(x))``; off: ``(jnp.sin(x), jnp.cos(x))``.

    XLA:CPU lowers ``jnp.sin``/``jnp.cos`` to scalar ``sincosf`` calls, one element at a time,
    and recomputes them in every fusion that reads them. This is one range reduction by pi/2
    and two short polynomials, which vectorize (CartPole's loop: 1.6x faster). Error against
    float64 sin/cos: at most 9.3e-8 absolute for |x| <= 1e4 (``jnp.sin``: 3.3e-8)."""
    if not enabled():
        return jnp.sin(x), jnp.cos(x)
    k = jnp.round(x * _TWO_OVER_PI)
    r = x - k * _PIO2[0] - k * _PIO2[1] - k * _PIO2[2]
    z = r * r
    s = r + r * z * ((_SIN[0] * z + _SIN[1]) * z + _SIN[2])
    c = np.float32(1.0) - np.float32(0.5) * z + z * z * ((_COS[0] * z + _COS[1]) * z + _COS[2])
    quadrant = k.astype(jnp.int32) & 3
    sin = jnp.where(quadrant == 0, s, jnp.where(quadrant == 1, c, jnp.where(quadrant == 2, -s, -c)))
    cos = jnp.where(quadrant == 0, c, jnp.where(quadrant == 1, -s, jnp.where(quadrant == 2, -c, s)))
    return sin, cos


# ---- training draws: a counter hash instead of threefry ---------------------------------------

_MIX = (np.uint32(0x7FEB352D), np.uint32(0x846CA68B))
"""lowbias32 (Wellons' hash-prospector): a bijection of uint32 with low avalanche bias."""


def _mix(x: jax.Array) -> jax.Array:
    x = x ^ (x >> 16)
    x = x * _MIX[0]
    x = x ^ (x >> 15)
    x = x * _MIX[1]
    return x ^ (x >> 16)


class HashDraws(NamedTuple):
    """The draw interface of ``Draws`` (``integers``, ``choice``, ``random``) for a port's
    training ``step``: draw ``k`` is a hash of (seed, k), a few integer operations, where
    ``Draws.from_key`` splits a threefry key twice and writes its log. Nothing is logged: it
    is never used under verification (the verifier passes ``Draws.from_tape``)."""

    seed: jax.Array
    counter: jax.Array

    def _next(self) -> tuple[jax.Array, HashDraws]:
        bits = _mix(self.seed ^ _mix(self.counter * np.uint32(0x9E3779B9)))
        return bits, self._replace(counter=self.counter + np.uint32(1))

    def integers(self, low: Any, high: Any, when: Any = None) -> tuple[jax.Array, HashDraws]:
        """An integer on [low, high) (int32; the bias of ``bits % span`` is below 2^-24)."""
        bits, out = self._next()
        span = jnp.maximum(jnp.asarray(high) - jnp.asarray(low), 1).astype(jnp.uint32)
        return (jnp.asarray(low) + (bits % span).astype(jnp.int32)).astype(jnp.int32), out

    def choice(self, n: Any, p: Any = None, when: Any = None) -> tuple[jax.Array, HashDraws]:
        if p is not None:
            raise ValueError("HashDraws.choice draws uniformly only (no p)")
        return self.integers(0, n, when)

    def random(self, when: Any = None) -> tuple[jax.Array, HashDraws]:
        bits, out = self._next()
        return (bits >> 8).astype(jnp.float32) * np.float32(1.0 / 16777216.0), out


def training_draws(key: jax.Array, log_size: int = 1) -> Any:
    """A training step's draws from ``key``: :class:`HashDraws` with the layer on, else
    ``Draws.from_key(key, log_size)`` (threefry, the reference-checked generator)."""
    from envforge.rng.jax_draws import Draws

    if not enabled():
        return Draws.from_key(key, log_size)
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    seed = _mix(data.reshape(-1)[0].astype(jnp.uint32) ^ _mix(data.reshape(-1)[-1]))
    return HashDraws(seed, jnp.uint32(0))


_ADVANCE = (np.uint32(0x68E31DA4), np.uint32(0xB5297A4D))


def split(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(key to keep, key to use)`` for a port's training generator, as ``jax.random.split``.
    On: the key to use is ``key`` itself (:func:`training_draws` and :func:`permutation` hash
    it) and the key to keep is ``key`` hashed, a few integer operations where threefry runs 20
    rounds; off: ``jax.random.split(key)``. Use each key once."""
    if not enabled():
        kept, sub = jax.random.split(key)
        return kept, sub
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    data = jax.random.key_data(key) if typed else key
    flat = data.reshape(-1).astype(jnp.uint32)
    first, last = flat[0], flat[-1]
    kept = jnp.stack([_mix(first ^ _mix(last ^ _ADVANCE[0])), _mix(last ^ _ADVANCE[1])])
    kept = kept.reshape(data.shape).astype(data.dtype)
    return (jax.random.wrap_key_data(kept) if typed else kept), key


def permutation(key: jax.Array, n: int) -> jax.Array:
    """A uniformly random permutation of ``range(n)``: one sort of ``n`` hashed keys with the
    index in their low bits (two keys tie in their high bits with probability about
    n^2 / 2^(33 - bits(n)), 1e-4 for n = 108: the tie keeps index order); off:
    ``jax.random.permutation`` (its threefry bits and its rounds of sorting)."""
    if not enabled():
        return jax.random.permutation(key, n)
    if n > 1 << 12:
        raise ValueError(f"permutation: n = {n} is above 4096")
    seed = training_draws(key).seed
    index = jnp.arange(n, dtype=jnp.uint32)
    bits = _mix(seed ^ _mix(index * np.uint32(0x9E3779B9)))
    # one sort of one array (XLA:CPU sorts key-value pairs 5x slower): the index in the low bits
    low = np.uint32((1 << int(n - 1).bit_length()) - 1)
    return (jnp.sort((bits & ~low) | index) & low).astype(jnp.int32)


def flag_lookup(table: Any, index: jax.Array) -> jax.Array:
    """``table[index]`` for a constant boolean table of at most 64 entries (a map's holes, a
    board's walls), ``index`` in range. On: bit ``index`` of the table packed into two uint32
    words (a select, a shift and a mask); under ``vmap`` the lookup is otherwise a gather, which
    XLA:CPU runs element by element (FrozenLake's three lookups were about a quarter of its
    bench rollout). Off: the gather. The same values either way."""
    flags = np.asarray(table, dtype=bool).reshape(-1)
    if len(flags) > 64:
        raise ValueError(f"flag_lookup: {len(flags)} entries, at most 64")
    if not enabled():
        return jnp.asarray(flags)[index]
    mask = sum(1 << int(i) for i in np.flatnonzero(flags))
    index = jnp.asarray(index).astype(jnp.uint32)
    word = jnp.where(index < 32, np.uint32(mask & 0xFFFFFFFF), np.uint32(mask >> 32))
    return ((word >> (index & np.uint32(31))) & np.uint32(1)).astype(jnp.bool_)


def shuffles_lazily(draws: Any) -> bool:
    """Whether a port may shuffle lazily with these draws: training draws (:class:`HashDraws`,
    the layer on), where only the distribution of the cards dealt matters, not which draw
    decides them. A lazy shuffle swaps each card dealt from the top with a uniformly random
    card at or below it (one Fisher-Yates step per card, when it is dealt) instead of running
    the whole Fisher-Yates loop when the pile is made: the same uniform deal, and under
    ``vmap`` no env waits for another's 100-step shuffle. Never with ``Draws`` (verification
    replays the reference's draws in its order)."""
    return isinstance(draws, HashDraws)
