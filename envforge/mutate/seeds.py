"""Resets of two implementations compared over every uint32 seed, in chunks.

A mutation in a seed hash can change the state for one seed in four billion (a guard like
``where(x == 0, 1, x)``); only an exhaustive comparison shows such a mutant is not equivalent.
Two JAX port modules are compared on the device, state by state; any other two drivers (Rust
ports, C references) by their block digests (``Driver.reset_digest_range``, both sides in
parallel), a differing block then reset on both sides and compared under the spec's equality.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np

from envforge.backends.base import Driver
from envforge.spec import EnvSpec
from envforge.verify.compare import compare_states

CHUNK = 1 << 22
BLOCK = 4096
"""Seeds per digest when drivers are compared (the L1 sweep's block)."""


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


def first_differing_seed_of_drivers(
    spec: EnvSpec, original: Driver, mutant: Driver, first: int = 0, end: int = 1 << 32
) -> tuple[int | None, int]:
    """``first_differing_seed`` for any two drivers, by block digests, over seeds
    ``[first, end)``."""
    checked = 0
    with ThreadPoolExecutor(2) as pool:
        for start in range(first, end, CHUNK):
            count = min(CHUNK, end - start)
            digests = [
                pool.submit(side.reset_digest_range, start, count, BLOCK)
                for side in (original, mutant)
            ]
            a, b = (d.result() for d in digests)
            checked += count
            for k in np.flatnonzero(a != b):
                low = start + int(k) * BLOCK
                high = min(start + count, low + BLOCK)
                seeds = np.arange(low, high, dtype=np.uint64).astype(np.uint32)
                row = compare_states(spec, original.reset(seeds), mutant.reset(seeds)).first()
                if row is not None:  # else the bits differ, the states do not (NaN payloads)
                    return low + row, checked
    return None, checked
