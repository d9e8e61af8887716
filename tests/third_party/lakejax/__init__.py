"""``lakejax``: a stand-in for a third-party JAX environment library (docs/THIRD_PARTY.md), written
for envforge's tests in the style such libraries share: an environment object with
``default_params``, ``reset_env(key, params)`` and ``step_env(key, state, action, params)``
that split their own ``jax.random`` key, a dataclass state, and ``step`` that resets
automatically when an episode ends. Nothing in it knows envforge.

The game is FrozenLake-v1's slippery 8x8 lake: a move goes in the chosen direction or slips to
either side, each with probability 1/3; a hole or the goal ends the episode, the goal pays 1;
an episode is cut after ``max_steps_in_episode`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

LAKE = (
    "SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF",
    "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG",
)  # fmt: skip
_TILES = np.array([list(row) for row in LAKE])


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EnvParams:
    max_steps_in_episode: int = 100


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EnvState:
    row: jax.Array
    col: jax.Array
    time: jax.Array


class FrozenLake:
    """The slippery 8x8 lake. Actions: 0 left, 1 down, 2 right, 3 up."""

    def __init__(self) -> None:
        self.stops = jnp.asarray(np.isin(_TILES, ["H", "G"]))
        self.goal = jnp.asarray(_TILES == "G")

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def get_obs(self, state: EnvState) -> jax.Array:
        return state.row * 8 + state.col

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        state = EnvState(jnp.int32(0), jnp.int32(0), jnp.int32(0))
        return self.get_obs(state), state

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict]:
        slip = jax.random.choice(key, jnp.array([-1, 0, 1]))
        heading = (action + slip) % 4
        d_row = jnp.array([0, 1, 0, -1])[heading]
        d_col = jnp.array([-1, 0, 1, 0])[heading]
        stuck = self.stops[state.row, state.col]
        row = jnp.where(stuck, state.row, jnp.clip(state.row + d_row, 0, 7))
        col = jnp.where(stuck, state.col, jnp.clip(state.col + d_col, 0, 7))
        new = EnvState(row.astype(jnp.int32), col.astype(jnp.int32), state.time + 1)
        reward = jnp.where(~stuck & self.goal[row, col], 1.0, 0.0)
        ended = stuck | self.stops[row, col]
        cut = new.time >= params.max_steps_in_episode
        return self.get_obs(new), new, reward, ended | cut, {"ended": ended, "time_limit": cut}

    def step(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict]:
        """``step_env``, then a fresh episode where it ended (what training loops call)."""
        key_step, key_reset = jax.random.split(key)
        obs, new, reward, done, info = self.step_env(key_step, state, action, params)
        obs_reset, fresh = self.reset_env(key_reset, params)
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), fresh, new)
        return jnp.where(done, obs_reset, obs), new, reward, done, info
