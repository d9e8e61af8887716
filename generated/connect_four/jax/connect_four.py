"""Connect Four in JAX: a port of PettingZoo 1.27.0's ``classic.connect_four_v3`` (its
``raw_env`` rules with the ``TerminateIllegalWrapper`` the module's ``env()`` adds).

Only the rules live here, with the reference's names (``board``, ``piece``,
``check_for_winner``); whose turn it is, each agent's reward, who is done, the action masks and
illegal moves are the port kit's seat bookkeeping (``envforge.kit.TurnBased``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from envforge.kit import TurnBased, TurnBasedRules

ROW_COUNT = 6
COLUMN_COUNT = 7
N_AGENTS = 2


class Game(NamedTuple):
    board: jax.Array
    """int32[42], row by row from the top: 0 empty, 1 player_0's piece, 2 player_1's"""


def init(seed: jax.Array) -> Game:
    return Game(board=jnp.zeros(ROW_COUNT * COLUMN_COUNT, jnp.int32))


def legal_moves(game: Game) -> jax.Array:
    """A column is open while its top square is empty."""
    return game.board[:COLUMN_COUNT] == 0


def check_for_winner(board: jax.Array, piece: jax.Array) -> jax.Array:
    """Four of ``piece`` in a row anywhere on the board: across, down, and both diagonals."""
    b = board.reshape(ROW_COUNT, COLUMN_COUNT) == piece
    across = b[:, :-3] & b[:, 1:-2] & b[:, 2:-1] & b[:, 3:]
    down = b[:-3, :] & b[1:-2, :] & b[2:-1, :] & b[3:, :]
    falling = b[:-3, :-3] & b[1:-2, 1:-2] & b[2:-1, 2:-1] & b[3:, 3:]
    rising = b[3:, :-3] & b[2:-1, 1:-2] & b[1:-2, 2:-1] & b[:-3, 3:]
    return across.any() | down.any() | falling.any() | rising.any()


def play(game: Game, seat: jax.Array, action: jax.Array) -> tuple[Game, jax.Array, jax.Array]:
    """Drop ``seat``'s piece into column ``action``: it lands on the lowest empty square."""
    piece = seat + 1
    column = game.board.reshape(ROW_COUNT, COLUMN_COUNT)[:, action]
    lowest_empty = ROW_COUNT - 1 - jnp.argmax(column[::-1] == 0)
    board = game.board.at[lowest_empty * COLUMN_COUNT + action].set(piece)
    winner = check_for_winner(board, piece)
    full = jnp.all(board != 0)
    other = (seat + 1) % N_AGENTS
    won = jnp.zeros(N_AGENTS, jnp.float32).at[seat].set(1.0).at[other].set(-1.0)
    rewards = jnp.where(winner, won, jnp.zeros(N_AGENTS, jnp.float32))
    return Game(board), rewards, winner | full


def observe_seat(game: Game, seat: int) -> jax.Array:
    """float32[6, 7, 2]: the seat's own pieces, then its opponent's."""
    board = game.board.reshape(ROW_COUNT, COLUMN_COUNT)
    own = board == seat + 1
    opponent = board == (seat + 1) % N_AGENTS + 1
    return jnp.stack([own, opponent], axis=2).astype(jnp.float32)


RULES = TurnBasedRules(
    n_agents=N_AGENTS,
    init=init,
    legal_actions=legal_moves,
    play=play,
    observe=observe_seat,
    to_fields=lambda game: {"board": game.board},
    from_fields=lambda fields: Game(board=jnp.asarray(fields["board"], jnp.int32)),
)
GAME = TurnBased(RULES, n_actions=COLUMN_COUNT, illegal="terminate", illegal_reward=-1.0)

reset = GAME.reset
step = GAME.step
observe = GAME.observe
to_canonical = GAME.to_canonical
from_canonical = GAME.from_canonical
legal_action_mask = GAME.legal_action_mask
current_player = GAME.current_player
