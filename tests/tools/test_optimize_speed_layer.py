"""The speed layer's training draws and shuffles (envforge/kit/speed_layer.py), which the UNO JAX
port's training step uses: the same kinds of values as ``Draws``, uniform where it matters,
and off they are ``Draws.from_key`` and ``jax.random.permutation`` themselves."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from envforge.kit import speed_layer
from envforge.rng.jax_draws import Draws

pytestmark = pytest.mark.slow  # 80 s on a loaded 2-core machine (jit of a 6000-step scan)


def test_hash_draws_cover_their_range_uniformly_and_switch_off_to_draws() -> None:
    draws = speed_layer.training_draws(jax.random.PRNGKey(7))
    assert isinstance(draws, speed_layer.HashDraws) and speed_layer.shuffles_lazily(draws)

    def draw(d: speed_layer.HashDraws, _: None) -> tuple[speed_layer.HashDraws, jax.Array]:
        value, d = d.integers(2, 8)
        return d, value

    _, values = jax.lax.scan(draw, draws, None, length=6000)
    counts = np.bincount(np.asarray(values), minlength=8)[2:]
    assert counts.sum() == 6000 and counts.min() > 850 and counts.max() < 1150, counts
    with speed_layer.switched(False):
        off = speed_layer.training_draws(jax.random.PRNGKey(7))
    assert isinstance(off, Draws) and not speed_layer.shuffles_lazily(off)


def test_permutation_is_a_permutation_and_off_is_jax_random_permutation() -> None:
    keys = jax.random.split(jax.random.PRNGKey(0), 400)
    perms = np.asarray(jax.vmap(lambda k: speed_layer.permutation(k, 108))(keys))
    assert all(sorted(p) == list(range(108)) for p in perms)
    # each index lands in the first place about 400/108 times, not always the same
    assert len(set(perms[:, 0])) > 60
    with speed_layer.switched(False):
        off = speed_layer.permutation(keys[3], 108)
    assert np.array_equal(off, jax.random.permutation(keys[3], 108))


def test_split_keeps_a_new_key_and_switches_off_to_jax_random_split() -> None:
    """The speed layer's split (Blackjack, Taxi, FrozenLake and Leduc training steps): the key
    to use is the key itself, the key kept a hash of it; 4096 envs seeded 0..4095 stepped 64
    times never meet the same key; off it is ``jax.random.split``."""
    import jax.numpy as jnp

    key = jax.random.PRNGKey(7)
    kept, sub = speed_layer.split(key)
    assert np.array_equal(sub, key) and not np.array_equal(kept, key) and kept.dtype == key.dtype

    def advance(keys: jax.Array, _: None) -> tuple[jax.Array, jax.Array]:
        kept, _ = jax.vmap(speed_layer.split)(keys)
        return kept, kept

    seeds = jax.vmap(jax.random.PRNGKey)(jnp.arange(4096, dtype=jnp.uint32))
    _, keys = jax.lax.scan(advance, seeds, None, length=64)
    flat = np.asarray(keys).reshape(-1, 2)
    assert len(np.unique(flat, axis=0)) == len(flat)
    with speed_layer.switched(False):
        off = speed_layer.split(key)
    assert all(np.array_equal(a, b) for a, b in zip(off, jax.random.split(key), strict=True))
