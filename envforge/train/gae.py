"""Generalized advantage estimation as a reverse ``lax.scan`` over a rollout."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    dones: jax.Array,
    last_value: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets for a rollout laid out time-major ``[T, ...]``.

    ``dones[t]`` says the episode ended with step t (so step t+1 starts a new one and its value
    must not be bootstrapped into step t). ``last_value`` is V of the observation after step T-1.
    """
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    not_done = 1.0 - dones.astype(jnp.float32)
    deltas = rewards + gamma * next_values * not_done - values

    def backwards(carry: jax.Array, x: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, keep = x
        advantage = delta + gamma * gae_lambda * keep * carry
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backwards, jnp.zeros_like(last_value), (deltas, not_done), reverse=True
    )
    return advantages, advantages + values
