"""FrozenLake-v1 (8x8 map, slippery) in JAX, drawing from its own ``jax.random`` key the way
gymnax-style libraries do (``jax.random.randint`` over the three moves), not through
``envforge.rng.jax_draws.Draws``: no tape can be replayed to it, so it is verified in
distribution mode (``env.toml`` beside it). Written by hand (PROVENANCE.md), from
``generated/frozenlake/jax/frozenlake.py``: the same map and rules, another generator.

From a hole or the goal the agent stays put, is paid 0 and is terminated. Truncation after 100
steps is the TimeLimit wrapper's, from ``time``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# the reference compares a float64 draw with float64 cumulative probabilities
jax.config.update("jax_enable_x64", True)

MAP = (
    "SFFFFFFF",
    "FFFFFFFF",
    "FFFHFFFF",
    "FFFFFHFF",
    "FFFHFFFF",
    "FHHFFFHF",
    "FHFFHFHF",
    "FFFHFFFG",
)
NROW = NCOL = 8
MAX_EPISODE_STEPS = 100

_CELLS = np.array([c for row in MAP for c in row])
STOPS = jnp.asarray(np.isin(_CELLS, ["H", "G"]))  # holes and the goal end the episode
GOAL = jnp.asarray(_CELLS == "G")
START = int(np.flatnonzero(_CELLS == "S")[0])


class EnvState(NamedTuple):
    s: jax.Array  # int32 cell index, row * 8 + col
    time: jax.Array  # int32 steps since reset (TimeLimit's counter)
    key: jax.Array  # the port's own generator (training only; not canonical)


def _move(s: jax.Array, direction: jax.Array) -> jax.Array:
    """The cell one step in ``direction`` (0 left, 1 down, 2 right, 3 up), clamped to the map."""
    row, col = s // NCOL, s % NCOL
    col = jnp.where(direction == 0, jnp.maximum(col - 1, 0), col)
    row = jnp.where(direction == 1, jnp.minimum(row + 1, NROW - 1), row)
    col = jnp.where(direction == 2, jnp.minimum(col + 1, NCOL - 1), col)
    row = jnp.where(direction == 3, jnp.maximum(row - 1, 0), row)
    return (row * NCOL + col).astype(jnp.int32)


def reset(seed: jax.Array) -> EnvState:
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    return EnvState(jnp.int32(START), jnp.int32(0), key)


def observe(state: EnvState) -> jax.Array:
    return state.s.astype(jnp.float32)


def _step(state: EnvState, action: jax.Array, key: jax.Array) -> tuple:
    pick = jax.random.randint(key, (), 0, 3)  # 0: (a - 1) % 4, 1: a, 2: (a + 1) % 4
    direction = (action + 3 + pick) % 4
    stuck = STOPS[state.s]
    s = jnp.where(stuck, state.s, _move(state.s, direction))
    reward = jnp.where(~stuck & GOAL[s], 1.0, 0.0).astype(jnp.float32)
    terminated = stuck | STOPS[s]
    time = state.time + 1
    truncated = time >= MAX_EPISODE_STEPS
    new = EnvState(s, time, state.key)
    return new, observe(new), reward, terminated, truncated


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the port's own draw from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def step(state: EnvState, action: jax.Array) -> tuple:
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated = _step(state, action, sub)
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"s": state.s, "time": state.time}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    s = jnp.asarray(fields["s"]).astype(jnp.int32)
    time = jnp.asarray(fields["time"]).astype(jnp.int32)
    key = jax.random.fold_in(jax.random.PRNGKey(s.astype(jnp.uint32)), time)
    return EnvState(s, time, key)
