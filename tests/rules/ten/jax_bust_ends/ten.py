"""A JAX port of Ten that reads the bust rule as the end of the game (rule case tests)."""

from typing import NamedTuple

import jax.numpy as jnp


class State(NamedTuple):
    total: jnp.ndarray
    moves: jnp.ndarray


def observe(state):
    return jnp.stack([state.total, state.moves]).astype(jnp.float32)


def reset(seed):
    return State(jnp.int32(0), jnp.int32(0))


def step(state, action):
    total = state.total + jnp.where(action == 1, 2, 1).astype(jnp.int32)
    moves = state.moves + 1
    won = total == 10
    bust = total > 10
    reward = jnp.where(won, 1.0, jnp.where(bust, -1.0, 0.0)).astype(jnp.float32)
    terminated = won | bust
    truncated = (moves >= 20) & ~terminated
    new = State(total, moves)
    return new, observe(new), reward, terminated, truncated


def to_canonical(state):
    return {"total": state.total, "moves": state.moves}


def from_canonical(fields):
    return State(jnp.int32(fields["total"]), jnp.int32(fields["moves"]))
