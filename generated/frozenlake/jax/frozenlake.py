"""FrozenLake-v1 (8x8 map, slippery) in JAX, ported by hand from gymnasium 1.4.0
``envs/toy_text/frozen_lake.py``.

Each step asks for one uniform float ``u`` (the reference's ``categorical_sample`` over the
three moves ``(a - 1) % 4, a, (a + 1) % 4`` with probabilities ``fail, success, fail``) and
picks the first move whose cumulative probability exceeds ``u``, summed in the same order in
float64 as the reference's ``np.cumsum``. From a hole or the goal the agent stays put, is paid
0 and is terminated (the reference still draws there). Truncation after 100 steps is the
TimeLimit wrapper's, from ``time``.

Randomness comes through ``envforge.kit.Draws``: ``step`` (training) draws from the
key kept in the state (through the speed layer's hashed draws, or ``Draws.from_key`` with the
layer off), ``step_with_draws`` from whatever ``Draws`` it is given (the verifier's
tape of the reference's draws).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envforge.kit import Draws, speed_layer

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
SUCCESS_RATE = 1.0 / 3.0
FAIL_RATE = (1.0 - SUCCESS_RATE) / 2.0
# np.cumsum([fail, success, fail]) in float64, added left to right as the reference does
CUMULATIVE = (FAIL_RATE, FAIL_RATE + SUCCESS_RATE, FAIL_RATE + SUCCESS_RATE + FAIL_RATE)
MAX_EPISODE_STEPS = 100

_CELLS = np.array([c for row in MAP for c in row])
STOPS = np.isin(_CELLS, ["H", "G"])  # holes and the goal end the episode
GOAL = _CELLS == "G"
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


def step_with_draws(
    state: EnvState, action: jax.Array, draws: Draws
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array, Draws]:
    u, draws = draws.random()
    pick = jnp.where(
        u < CUMULATIVE[0], 0, jnp.where(u < CUMULATIVE[1], 1, jnp.where(u < CUMULATIVE[2], 2, 0))
    )
    direction = (action + 3 + pick) % 4  # moves (a - 1) % 4, a, (a + 1) % 4
    stuck = speed_layer.flag_lookup(STOPS, state.s)  # speed layer: STOPS[state.s]
    s = jnp.where(stuck, state.s, _move(state.s, direction))
    reward = jnp.where(~stuck & speed_layer.flag_lookup(GOAL, s), 1.0, 0.0).astype(jnp.float32)
    terminated = stuck | speed_layer.flag_lookup(STOPS, s)
    time = state.time + 1
    truncated = time >= MAX_EPISODE_STEPS
    new = EnvState(s, time, state.key)
    return new, observe(new), reward, terminated, truncated, draws


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Training: the draw comes from the key in the state."""
    key, sub = speed_layer.split(state.key)  # speed layer: hashed keys and draws
    new, obs, reward, terminated, truncated, _ = step_with_draws(
        state, action, speed_layer.training_draws(sub, 1)
    )
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"s": state.s, "time": state.time}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    s = jnp.asarray(fields["s"]).astype(jnp.int32)
    time = jnp.asarray(fields["time"]).astype(jnp.int32)
    key = jax.random.fold_in(jax.random.PRNGKey(s.astype(jnp.uint32)), time)
    return EnvState(s, time, key)
