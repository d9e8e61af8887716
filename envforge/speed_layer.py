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
* :func:`sincos` is a vectorized polynomial: off, it is ``jnp.sin``/``jnp.cos``, which differ
  from it by about one float32 ulp. Use it only where the spec compares within a tolerance.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

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
