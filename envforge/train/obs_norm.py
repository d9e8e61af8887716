"""Running observation mean and variance (parallel Welford update), for optional normalization."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

CLIP = 10.0


class ObsNorm(NamedTuple):
    mean: jax.Array
    var: jax.Array
    samples: jax.Array


def init_obs_norm(obs_dim: int) -> ObsNorm:
    # a tiny prior count keeps the first update from dividing by zero
    return ObsNorm(jnp.zeros((obs_dim,)), jnp.ones((obs_dim,)), jnp.asarray(1e-4))


def update_obs_norm(norm: ObsNorm, batch: jax.Array) -> ObsNorm:
    """Fold a batch ``[N, obs_dim]`` into the running moments (Chan et al. parallel formula)."""
    batch = batch.reshape(-1, norm.mean.shape[0]).astype(jnp.float32)
    n = batch.shape[0]
    batch_mean = batch.mean(axis=0)
    batch_var = batch.var(axis=0)
    total = norm.samples + n
    delta = batch_mean - norm.mean
    mean = norm.mean + delta * n / total
    m2 = norm.var * norm.samples + batch_var * n + delta**2 * norm.samples * n / total
    return ObsNorm(mean, m2 / total, total)


def normalize_obs(norm: ObsNorm, obs: jax.Array) -> jax.Array:
    flat = obs.reshape(*obs.shape[: obs.ndim - 1], norm.mean.shape[0]).astype(jnp.float32)
    return jnp.clip((flat - norm.mean) / jnp.sqrt(norm.var + 1e-8), -CLIP, CLIP)
