"""The functions ``backends/jax.py`` traces for one env, vmapped and jitted there: the step
with draws from a tape or a key, the training step with its ``key`` made from a seed, and the
reset digest computed beside the resets."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp

from envforge.errors import ContractViolation
from envforge.native.digest.blocks import LANE_START, fold_index, word_key
from envforge.rng import jax_draws
from envforge.spec import EnvSpec


def _key(seed: Any) -> Any:
    """A ``jax.random`` key from a seed given as two uint32 halves."""
    return jax.random.fold_in(jax.random.PRNGKey(seed[0]), seed[1])


def draws_step(m: ModuleType, size: int) -> Callable[..., tuple]:
    """One env's ``step_with_draws`` with draws from ``tape`` where ``taped``, else from a key
    made from ``seed``; its draw log comes back as a tuple of arrays."""

    def one(canon: dict, action: Any, tape: Any, seed: Any, taped: Any) -> tuple:
        own = jax_draws.Draws.from_key(_key(seed), size)
        draws = own._replace(tape=tape.astype(own.tape.dtype), taped=taped)
        s2, obs, reward, term, trunc, d = m.step_with_draws(m.from_canonical(canon), action, draws)
        log = (d.kind, d.a, d.b, d.value, d.site, d.drawn)
        return m.to_canonical(s2), obs, reward, term, trunc, log

    return one


def training_step(m: ModuleType) -> Callable[..., tuple]:
    """One env's own ``step`` with ``state.key`` (its training generator) made from ``seed``."""

    def one(canon: dict, action: Any, seed: Any) -> tuple:
        s = m.from_canonical(canon)
        old = getattr(s, "key", None)
        if old is None or not callable(getattr(s, "_replace", None)):
            raise ContractViolation(
                "port", "step", "its state keeps no `key` (the training generator)"
            )
        typed = jnp.issubdtype(old.dtype, jax.dtypes.prng_key)
        key = jax.random.wrap_key_data(_key(seed)) if typed else _key(seed)
        if key.shape != old.shape or key.dtype != old.dtype:
            raise ContractViolation(
                "port",
                "step",
                f"state.key is {old.dtype}{list(old.shape)}, "
                f"not a jax.random key ({key.dtype}{list(key.shape)})",
            )
        s2, obs, reward, term, trunc = m.step(s._replace(key=key), action)
        return m.to_canonical(s2), obs, reward, term, trunc

    return one


def digest_lanes(spec: EnvSpec, canon: dict, n: int, block: int) -> tuple[Any, Any]:
    """``digest.blocks`` of ``n`` canonical states (both lanes, summed per ``block``)."""
    lo = jnp.full(n, LANE_START[0], jnp.uint32)
    hi = jnp.full(n, LANE_START[1], jnp.uint32)
    j = 0
    for f in spec.state:
        value = jnp.asarray(canon[f.name]).reshape(n, -1)
        if f.np_dtype.itemsize == 1:
            words = value.astype(jnp.uint32)
        else:
            words = jax.lax.bitcast_convert_type(value, jnp.uint32)
        for k in range(words.shape[1]):
            lo = (lo ^ words[:, k]) * jnp.uint32(word_key(j, 0))
            hi = (hi ^ words[:, k]) * jnp.uint32(word_key(j, 1))
            j += 1
    lo, hi = fold_index(lo, hi, jnp.arange(n, dtype=jnp.uint32) % jnp.uint32(block))
    return (
        lo.reshape(-1, block).sum(axis=1, dtype=jnp.uint32),
        hi.reshape(-1, block).sum(axis=1, dtype=jnp.uint32),
    )
