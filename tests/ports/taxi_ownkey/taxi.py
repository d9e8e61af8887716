"""Taxi-v4 with ``is_rainy=True`` and ``fickle_passenger=True`` in JAX, drawing from its own
``jax.random`` key the way gymnax-style libraries do (not through
``envforge.rng.jax_draws.Draws``; no tape can be replayed to it, so it is verified in
distribution mode, ``env.toml`` beside it). Written by hand (PROVENANCE.md) from
``generated/taxi/jax/taxi.py``: the same tables and rules, another generator.

State ``s`` encodes ``((taxi_row * 5 + taxi_col) * 5 + passenger) * 4 + destination``
(passenger 4 = in the taxi). Each step draws from two keys split off its own:

1. one uniform float ``u``: the reference's ``categorical_sample`` over the action's
   transitions. A move (actions 0-3) goes forward with probability 0.8, else to the left or
   right of its heading (0.1 each), when the forward move is open; against a wall or the edge
   all three transitions stay put. Pickup and dropoff have one transition of probability 1.
2. only when the passenger was in the taxi, the fickle flag is set and the taxi moved: a
   choice among the three other destinations (the flag is then cleared).

The transition tables are built here at import from the map with the reference's rules.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# the reference compares a float64 draw with float64 cumulative probabilities
jax.config.update("jax_enable_x64", True)

MAP = (
    "+---------+",
    "|R: | : :G|",
    "| : | : : |",
    "| : : : : |",
    "| | : | : |",
    "|Y| : |B: |",
    "+---------+",
)
LOCS = ((0, 0), (0, 4), (4, 0), (4, 3))
MAX_ROW = MAX_COL = 4
RAINY_PROBABILITY = 0.8
LATERAL_PROBABILITY = (1.0 - RAINY_PROBABILITY) / 2.0
# np.cumsum([0.8, lateral, lateral]) in float64, added left to right as the reference does
MOVE_CUMULATIVE = (
    RAINY_PROBABILITY,
    RAINY_PROBABILITY + LATERAL_PROBABILITY,
    RAINY_PROBABILITY + LATERAL_PROBABILITY + LATERAL_PROBABILITY,
)
MAX_EPISODE_STEPS = 200
# (forward, left, right) offsets per heading: south, north, east, west
HEADINGS = (
    ((1, 0), (0, 1), (0, -1)),
    ((-1, 0), (0, -1), (0, 1)),
    ((0, 1), (-1, 0), (1, 0)),
    ((0, -1), (1, 0), (-1, 0)),
)
_DESC = np.array([list(row) for row in MAP])


def encode(row: int, col: int, passenger: int, dest: int) -> int:
    return ((row * 5 + col) * 5 + passenger) * 4 + dest


def _open(row: int, col: int, action: int) -> bool:
    """Whether the forward move of ``action`` is possible (no wall, not off the grid)."""
    if action == 0:
        return row < MAX_ROW
    if action == 1:
        return row > 0
    if action == 2:
        return bool(_DESC[1 + row, 2 * col + 2] == ":")
    return bool(_DESC[1 + row, 2 * col] == ":")


def _drift(row: int, col: int, dr: int, dc: int) -> tuple[int, int]:
    """A lateral move: clamped to the grid, blocked by the wall it would cross."""
    new_row = max(0, min(row + dr, MAX_ROW))
    new_col = max(0, min(col + dc, MAX_COL))
    if dc == 1 and _DESC[1 + new_row, 2 * new_col] != ":":
        return row, col
    if dc == -1 and _DESC[1 + new_row, 2 * new_col + 2] != ":":
        return row, col
    return new_row, new_col


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (state, action): the three move outcomes (forward, left, right), and the
    outcome, reward and terminated flag of pickup/dropoff (actions 4 and 5)."""
    moves = np.zeros((500, 4, 3), np.int32)
    outcome = np.zeros((500, 6), np.int32)
    reward = np.full((500, 6), -1, np.int32)
    done = np.zeros((500, 6), bool)
    for row in range(5):
        for col in range(5):
            for passenger in range(5):
                for dest in range(4):
                    s = encode(row, col, passenger, dest)
                    for action in range(4):
                        if _open(row, col, action):
                            forward, left, right = HEADINGS[action]
                            cells = [
                                (
                                    max(0, min(row + forward[0], MAX_ROW)),
                                    max(0, min(col + forward[1], MAX_COL)),
                                ),
                                _drift(row, col, *left),
                                _drift(row, col, *right),
                            ]
                        else:
                            cells = [(row, col)] * 3
                        for k, (r, c) in enumerate(cells):
                            moves[s, action, k] = encode(r, c, passenger, dest)
                    # pickup
                    if passenger < 4 and (row, col) == LOCS[passenger]:
                        outcome[s, 4] = encode(row, col, 4, dest)
                    else:
                        outcome[s, 4], reward[s, 4] = s, -10
                    # dropoff
                    if passenger == 4 and (row, col) == LOCS[dest]:
                        outcome[s, 5], reward[s, 5], done[s, 5] = (
                            encode(row, col, dest, dest),
                            20,
                            True,
                        )
                    elif passenger == 4 and (row, col) in LOCS:
                        outcome[s, 5] = encode(row, col, LOCS.index((row, col)), dest)
                    else:
                        outcome[s, 5], reward[s, 5] = s, -10
    return moves, np.stack([outcome, reward], -1), done


_MOVES, _SERVICE, _DONE = _tables()
MOVES = jnp.asarray(_MOVES)
SERVICE = jnp.asarray(_SERVICE)
DONE = jnp.asarray(_DONE)


class EnvState(NamedTuple):
    s: jax.Array  # int32 encoded state
    fickle_step: jax.Array  # bool: the passenger may still change their mind once
    time: jax.Array  # int32 steps since reset (TimeLimit's counter)
    key: jax.Array  # the port's own generator (training only; not canonical)


def reset(seed: jax.Array) -> EnvState:
    """Training resets: a uniform start with the passenger waiting away from the destination,
    fickle with probability 0.3 (the reference's distribution, not its numbers)."""
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    key, k_cell, k_pass, k_dest, k_fickle = jax.random.split(key, 5)
    cell = jax.random.randint(k_cell, (), 0, 25)
    passenger = jax.random.randint(k_pass, (), 0, 4)
    dest = (passenger + jax.random.randint(k_dest, (), 1, 4)) % 4
    s = ((cell * 5 + passenger) * 4 + dest).astype(jnp.int32)
    fickle = jax.random.uniform(k_fickle) < 0.3
    return EnvState(s, fickle, jnp.int32(0), key)


def observe(state: EnvState) -> jax.Array:
    return state.s.astype(jnp.float32)


def _step(state: EnvState, action: jax.Array, key: jax.Array) -> tuple:
    k_move, k_fickle = jax.random.split(key)
    u = jax.random.uniform(k_move, (), jnp.float64)
    is_move = action < 4
    pick = jnp.where(
        u < MOVE_CUMULATIVE[0],
        0,
        jnp.where(u < MOVE_CUMULATIVE[1], 1, jnp.where(u < MOVE_CUMULATIVE[2], 2, 0)),
    )
    moved_to = MOVES[state.s, jnp.minimum(action, 3), pick]
    service = SERVICE[state.s, jnp.maximum(action, 4)]
    s = jnp.where(is_move, moved_to, service[0])
    reward = jnp.where(is_move, -1, service[1]).astype(jnp.float32)
    terminated = ~is_move & DONE[state.s, jnp.maximum(action, 4)]

    # the fickle passenger: in the taxi before the step, and the taxi moved
    old_cell, new_cell = state.s // 20, s // 20
    old_dest = state.s % 4
    fickle = state.fickle_step & ((state.s // 4) % 5 == 4) & (old_cell != new_cell)
    index = jax.random.randint(k_fickle, (), 0, 3)
    others = jnp.where(index >= old_dest, index + 1, index)  # the destinations but old_dest
    s = jnp.where(fickle, s - s % 4 + others, s).astype(jnp.int32)

    time = state.time + 1
    truncated = time >= MAX_EPISODE_STEPS
    new = EnvState(s, state.fickle_step & ~fickle, time, state.key)
    return new, observe(new), reward, terminated, truncated


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the port's own draws from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def step(state: EnvState, action: jax.Array) -> tuple:
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated = _step(state, action, sub)
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"s": state.s, "fickle_step": state.fickle_step, "time": state.time}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    s = jnp.asarray(fields["s"]).astype(jnp.int32)
    time = jnp.asarray(fields["time"]).astype(jnp.int32)
    key = jax.random.fold_in(jax.random.PRNGKey(s.astype(jnp.uint32)), time)
    return EnvState(s, jnp.asarray(fields["fickle_step"]).astype(bool), time, key)
