"""How a JAX port takes its random numbers when its reference draws inside ``step``.

A port for a spec with ``[rng] step`` exports, besides the usual functions::

    step_with_draws(state, action, draws) -> (state, obs, reward, terminated, truncated, draws)

and asks ``draws`` for every random number, in the reference's order and of the reference's
kind, threading the returned ``draws`` on (``u, draws = draws.random()``). Its ``step`` for
training builds ``Draws.from_key`` from a ``jax.random`` key it keeps in its state. Under
verification the driver passes ``Draws.from_tape`` instead: each ask returns the reference's
next recorded value, and every ask is logged (kind, parameters, the port line that asked) so
that the verifier can account for it draw by draw (``verify/tape.py``).

``Draws`` is a pytree of fixed-size arrays, so ``step_with_draws`` jits and vmaps as usual. A
draw the reference makes only on some branch is asked with ``when=`` (its condition): when it
is false nothing is drawn, counted or logged, as on the reference. The
port's own generator is computed in both modes (``jnp.where`` picks), a few integer operations
per draw. Float values come in the default float dtype: a port whose reference compares drawn
floats in float64 (``u < 1/3``) should enable ``jax_enable_x64`` so it compares the same.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from envforge.rng.draws import KIND_CODE

SITES: list[str] = []
"""``file:line`` of every place a port asked for a draw, registered while tracing; a log's
``site`` is an index into it."""
DEFAULT_SIZE = 16


def _site() -> int:
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"
    if where not in SITES:
        SITES.append(where)
    return SITES.index(where)


def _float() -> Any:
    return jnp.result_type(float)


class Draws(NamedTuple):
    key: jax.Array
    """The port's own ``jax.random`` key (used when not taped)."""
    tape: jax.Array
    """The reference's recorded values, in order (``[K]``)."""
    taped: jax.Array
    """bool: take values from ``tape`` (verification) or from ``key`` (training)."""
    drawn: jax.Array
    """int32: draws asked so far (may pass ``K``: the extra ones are counted, not logged)."""
    kind: jax.Array
    a: jax.Array
    b: jax.Array
    value: jax.Array
    site: jax.Array

    @staticmethod
    def _new(key: jax.Array, tape: jax.Array, taped: Any) -> Draws:
        size = tape.shape[0]
        zeros = jnp.zeros(size, _float())
        return Draws(
            key=key,
            tape=tape.astype(_float()),
            taped=jnp.asarray(taped, bool),
            drawn=jnp.int32(0),
            kind=jnp.zeros(size, jnp.int32),
            a=zeros,
            b=zeros,
            value=zeros,
            site=jnp.full(size, -1, jnp.int32),
        )

    @staticmethod
    def from_key(key: jax.Array, size: int = DEFAULT_SIZE) -> Draws:
        """Training: every draw from ``key`` (split once per draw)."""
        return Draws._new(key, jnp.zeros(size, _float()), False)

    @staticmethod
    def from_tape(tape: jax.Array) -> Draws:
        """Verification: draw ``j`` is ``tape[j]``."""
        return Draws._new(jax.random.PRNGKey(0), jnp.asarray(tape), True)

    def _take(
        self, kind: str, a: Any, b: Any, own: Any, site: int, when: Any
    ) -> tuple[jax.Array, Draws]:
        size = self.tape.shape[0]
        when = jnp.asarray(True if when is None else when, bool)
        i = self.drawn
        j = jnp.minimum(i, size - 1)
        inside = (i < size) & when
        taped = jnp.where(inside, self.tape[j], jnp.zeros((), _float()))
        value = jnp.where(self.taped, taped, jnp.asarray(own, _float()))

        def log(arr: jax.Array, new: Any) -> jax.Array:
            return arr.at[j].set(jnp.where(inside, jnp.asarray(new, arr.dtype), arr[j]))

        key, _ = jax.random.split(self.key)
        out = self._replace(
            key=key,
            drawn=i + when.astype(jnp.int32),
            kind=log(self.kind, KIND_CODE[kind]),
            a=log(self.a, a),
            b=log(self.b, b),
            value=log(self.value, value),
            site=log(self.site, site),
        )
        return value, out

    def _sub(self) -> jax.Array:
        return jax.random.split(self.key)[1]

    def random(self, when: Any = None) -> tuple[jax.Array, Draws]:
        """A float on [0, 1) (numpy ``random()``, ``random.random()``)."""
        own = jax.random.uniform(self._sub(), (), _float())
        return self._take("random", 0.0, 1.0, own, _site(), when)

    def uniform(self, low: Any, high: Any, when: Any = None) -> tuple[jax.Array, Draws]:
        own = jax.random.uniform(self._sub(), (), _float(), low, high)
        return self._take("uniform", low, high, own, _site(), when)

    def integers(self, low: Any, high: Any, when: Any = None) -> tuple[jax.Array, Draws]:
        """An integer on [low, high) (int32)."""
        own = jax.random.randint(self._sub(), (), low, high)
        value, out = self._take("integers", low, high, own, _site(), when)
        return value.astype(jnp.int32), out

    def choice(self, n: int, p: Any = None, when: Any = None) -> tuple[jax.Array, Draws]:
        """The index (int32) of an element of a sequence of ``n`` (weights ``p`` or uniform)."""
        if p is None:
            own = jax.random.randint(self._sub(), (), 0, n)
            fingerprint: Any = 0.0
        else:
            weights = jnp.asarray(p, _float())
            own = jax.random.choice(self._sub(), n, p=weights)
            fingerprint = jnp.dot(weights, jnp.arange(1, n + 1, dtype=_float()))
        value, out = self._take("choice", n, fingerprint, own, _site(), when)
        return value.astype(jnp.int32), out

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, when: Any = None) -> tuple[jax.Array, Draws]:
        own = loc + scale * jax.random.normal(self._sub(), (), _float())
        return self._take("normal", loc, scale, own, _site(), when)
