"""Seat bookkeeping for turn-based games in JAX, written once: a game writes only its rules.

A game (:class:`TurnBasedRules`) says how a state starts, which actions the player to move
may take, what a legal move does (the next game state, each agent's reward, whether the game
is over) and what each seat observes. :class:`TurnBased` puts the seats around it, as the
spec's ``[agents]`` table describes them: whose turn it is, each agent's reward of the last
step, who is done, each agent's action mask, what an illegal action does (``terminate``: the
game ends for everyone, the mover gets ``illegal_reward``, as PettingZoo's
``TerminateIllegalWrapper`` does) and that a finished game stays finished. Its methods are a
whole :class:`~envforge.kit.contract.JaxTurnBasedPort`; a port module names them::

    GAME = TurnBased(RULES, n_actions=7, illegal="terminate")
    reset, step, observe = GAME.reset, GAME.step, GAME.observe
    to_canonical, from_canonical = GAME.to_canonical, GAME.from_canonical
    legal_action_mask, current_player = GAME.legal_action_mask, GAME.current_player

Everything is single-env and pure; the JAX backend, ``envforge.make`` and the functional API
vmap and jit it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class Seats(NamedTuple):
    """The seats' part of a state: PettingZoo's ``agent_selection``, ``rewards``,
    ``terminations`` and ``truncations``, agent by agent in seat order."""

    current_player: jax.Array
    rewards: jax.Array
    terminations: jax.Array
    truncations: jax.Array


class TurnState(NamedTuple):
    game: Any
    seats: Seats


@dataclass(frozen=True)
class TurnBasedRules:
    """What a turn-based game writes: its rules, and nothing about seats."""

    n_agents: int
    init: Callable[[jax.Array], Any]
    """seed (uint32) -> the game's state"""
    legal_actions: Callable[[Any], jax.Array]
    """game -> bool[n_actions]: what the player to move may play"""
    play: Callable[[Any, jax.Array, jax.Array], tuple[Any, jax.Array, jax.Array]]
    """(game, seat, legal action) -> (next game, float32[n_agents] rewards, game over)"""
    observe: Callable[[Any, int], jax.Array]
    """(game, seat) -> what that seat observes"""
    to_fields: Callable[[Any], dict[str, jax.Array]]
    """game -> its canonical fields (the seats' are added)"""
    from_fields: Callable[[dict[str, jax.Array]], Any]
    """canonical fields -> game"""
    first_player: int = 0


@dataclass(frozen=True)
class SeatFields:
    """The canonical names of the seats' fields (the ``[agents]`` table's defaults)."""

    current_player: str = "current_player"
    rewards: str = "rewards"
    terminations: str = "terminations"
    truncations: str = "truncations"
    action_mask: str | None = "legal_action_mask"


class TurnBased:
    """A turn-based game with its seats kept: the JAX port contract for several agents."""

    def __init__(
        self,
        rules: TurnBasedRules,
        n_actions: int,
        illegal: str = "terminate",
        illegal_reward: float = -1.0,
        fields: SeatFields = SeatFields(),
        illegal_next_player: int = 0,
        observation_parts: tuple[str, ...] | None = None,
    ) -> None:
        if illegal not in ("terminate", "allowed"):
            raise ValueError(f"illegal must be 'terminate' or 'allowed', not {illegal!r}")
        self.rules = rules
        self.n_actions = n_actions
        self.illegal = illegal
        self.illegal_reward = illegal_reward
        self.fields = fields
        self.illegal_next_player = illegal_next_player
        self.observation_parts = observation_parts
        """The agents' names, for a spec whose observation is one named part per agent:
        ``observe`` then returns ``{name: observation}`` instead of an agent-first array."""
        """Whose turn it is after an illegal move ended the game: PettingZoo hands the turn to
        the first agent that is done, seat 0."""

    # ---- the seats' bookkeeping --------------------------------------------------------
    def reset(self, seed: jax.Array) -> TurnState:
        n = self.rules.n_agents
        seats = Seats(
            current_player=jnp.int32(self.rules.first_player),
            rewards=jnp.zeros(n, jnp.float32),
            terminations=jnp.zeros(n, bool),
            truncations=jnp.zeros(n, bool),
        )
        return TurnState(self.rules.init(seed), seats)

    def step(
        self, state: TurnState, action: jax.Array
    ) -> tuple[TurnState, jax.Array, jax.Array, jax.Array, jax.Array]:
        """The current player's action: next state, every seat's observation (seat first), the
        first agent's reward, terminated and truncated (every agent done)."""
        n = self.rules.n_agents
        seat = state.seats.current_player
        finished = state.seats.terminations.all() | state.seats.truncations.all()
        action = jnp.clip(action, 0, self.n_actions - 1)
        legal = self.rules.legal_actions(state.game)[action]
        if self.illegal == "allowed":
            legal = jnp.bool_(True)
        played, rewards, over = self.rules.play(state.game, seat, action)
        moved = Seats(
            current_player=((seat + 1) % n).astype(jnp.int32),
            rewards=rewards.astype(jnp.float32),
            terminations=jnp.broadcast_to(over, (n,)),
            truncations=jnp.zeros(n, bool),
        )
        refused = Seats(
            current_player=jnp.int32(self.illegal_next_player),
            rewards=jnp.zeros(n, jnp.float32).at[seat].set(self.illegal_reward),
            terminations=jnp.ones(n, bool),
            truncations=jnp.ones(n, bool),
        )
        seats = jax.tree.map(lambda a, b: jnp.where(legal, a, b), moved, refused)
        game = jax.tree.map(lambda a, b: jnp.where(legal, a, b), played, state.game)
        nothing = state.seats._replace(rewards=jnp.zeros(n, jnp.float32))
        seats = jax.tree.map(lambda a, b: jnp.where(finished, a, b), nothing, seats)
        game = jax.tree.map(lambda a, b: jnp.where(finished, a, b), state.game, game)
        out = TurnState(game, seats)
        return (
            out,
            self.observe(out),
            seats.rewards[0],
            seats.terminations.all(),
            seats.truncations.all(),
        )

    def observe(self, state: TurnState) -> Any:
        """Every seat's observation, seat first (or by agent name, ``observation_parts``)."""
        seats = [self.rules.observe(state.game, k) for k in range(self.rules.n_agents)]
        if self.observation_parts is not None:
            return dict(zip(self.observation_parts, seats, strict=True))
        return jnp.stack(seats)

    def legal_action_mask(self, state: TurnState) -> jax.Array:
        """bool[n_agents, n_actions]: the player to move's legal actions, none for the others."""
        seats = jnp.arange(self.rules.n_agents) == state.seats.current_player
        return seats[:, None] & self.rules.legal_actions(state.game)[None, :]

    def current_player(self, state: TurnState) -> jax.Array:
        return state.seats.current_player

    # ---- canonical state -----------------------------------------------------------------
    def to_canonical(self, state: TurnState) -> dict[str, jax.Array]:
        names = self.fields
        out = dict(self.rules.to_fields(state.game))
        out[names.current_player] = state.seats.current_player
        out[names.rewards] = state.seats.rewards
        out[names.terminations] = state.seats.terminations
        out[names.truncations] = state.seats.truncations
        if names.action_mask is not None:
            out[names.action_mask] = self.legal_action_mask(state)
        return out

    def from_canonical(self, fields: dict[str, jax.Array]) -> TurnState:
        """The mask is not read: it follows from the game and whose turn it is."""
        names = self.fields
        seats = Seats(
            current_player=jnp.asarray(fields[names.current_player], jnp.int32),
            rewards=jnp.asarray(fields[names.rewards], jnp.float32),
            terminations=jnp.asarray(fields[names.terminations], bool),
            truncations=jnp.asarray(fields[names.truncations], bool),
        )
        return TurnState(self.rules.from_fields(fields), seats)
