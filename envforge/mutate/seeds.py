"""Resets of two JAX port modules compared over every uint32 seed, on the device, in chunks.

A mutation in a seed hash can change the state for one seed in four billion (a guard like
``where(x == 0, 1, x)``); only an exhaustive comparison shows such a mutant is not equivalent.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

CHUNK = 1 << 22


def _differs(a: Any, b: Any) -> Any:
    import jax.numpy as jnp

    same = (a == b) | (jnp.isnan(a) & jnp.isnan(b)) if a.dtype.kind == "f" else a == b
    return ~same.reshape(same.shape[0], -1).all(axis=1)


def first_differing_seed(original: ModuleType, mutant: ModuleType) -> tuple[int | None, int]:
    """(the smallest seed whose reset differs, or None; how many seeds were compared)."""
    import jax
    import jax.numpy as jnp

    def chunk(start: Any) -> tuple[Any, Any]:
        seeds = start + jnp.arange(CHUNK, dtype=jnp.uint32)
        a = jax.vmap(lambda s: original.to_canonical(original.reset(s)))(seeds)
        b = jax.vmap(lambda s: mutant.to_canonical(mutant.reset(s)))(seeds)
        bad = jnp.zeros(CHUNK, bool)
        for key in a:
            bad = bad | _differs(jnp.asarray(a[key]), jnp.asarray(b[key]))
        return bad.any(), jnp.argmax(bad)

    run = jax.jit(chunk)
    checked = 0
    for start in range(0, 1 << 32, CHUNK):
        found, index = run(jnp.uint32(start))
        checked += CHUNK
        if bool(found):
            return start + int(index), checked
    return None, checked
