"""Leduc Hold'em against a uniformly random opponent, in JAX: a hand port of rlcard 1.2.0's
``games/leducholdem`` and ``games/limitholdem/round.py`` with the single-agent adapter of
``references/leduc/leduc.py``.

Six cards, numbered 0..5 = SJ HJ SQ HQ SK HK (rank = card // 2). Each player holds one card;
after the first betting round one public card is dealt from the end of the deck. A betting
round: call, raise (at most two per round, by 2 in the first round and 4 in the second), fold
or check; it ends when both players have called or checked in turn. The agent is player 0;
after each of its actions the opponent (player 1) picks uniformly among its legal actions,
if the game is not over. The reward, when the game ends, is player 0's payoff in big blinds
(2 chips): the pot to whoever did not fold, else to the hand that pairs the public card,
else to the higher rank, split on a tie.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from envforge.kit import Draws, speed_layer

CALL, RAISE, FOLD, CHECK = 0, 1, 2, 3
NO_CARD = -1
DECK = 6
BIG_BLIND = 2
RAISES_PER_ROUND = 2
OPPONENT_DRAWS = 1
"""The opponent acts at most once per agent step (a round it ends is followed by the agent's)."""


class EnvState(NamedTuple):
    deck: jax.Array  # int32[6]: cards left, bottom first, then NO_CARD
    hands: jax.Array  # int32[2]: the agent's card, the opponent's
    public: jax.Array  # int32: the public card, or NO_CARD in the first round
    banked: jax.Array  # int32: chips each player put in during finished rounds
    raised: jax.Array  # int32[2]: chips each player put in during this round
    have_raised: jax.Array  # int32: raises so far this round
    not_raise_num: jax.Array  # int32: calls and checks in a row this round
    round_counter: jax.Array  # int32: finished rounds (2: the game is over)
    folded: jax.Array  # int32: who folded (-1: nobody); not canonical (a fold ends the game)
    key: jax.Array  # the port's own generator (training only; not canonical)


def rank(card: jax.Array) -> jax.Array:
    return card // 2


def raise_amount(state: EnvState) -> jax.Array:
    return jnp.where(state.round_counter >= 1, 2 * BIG_BLIND, BIG_BLIND)


def legal(state: EnvState, player: jax.Array) -> jax.Array:
    """bool[4] in rlcard's order: call, raise, fold, check."""
    top = jnp.max(state.raised)
    mine = state.raised[player]
    return jnp.stack(
        [mine != top, state.have_raised < RAISES_PER_ROUND, jnp.bool_(True), mine >= top]
    )


def is_over(state: EnvState) -> jax.Array:
    return (state.folded >= 0) | (state.round_counter >= 2)


def _act(state: EnvState, player: jax.Array, action: jax.Array) -> EnvState:
    """One legal action of ``player``, then the end of the round if it ends (the public card
    dealt after the first)."""
    top = jnp.max(state.raised)
    bet = jnp.where(action == RAISE, top + raise_amount(state), top)
    raised = jnp.where(
        (action == CALL) | (action == RAISE), state.raised.at[player].set(bet), state.raised
    )
    not_raise = jnp.where(
        action == RAISE,
        1,
        jnp.where(
            (action == CALL) | (action == CHECK), state.not_raise_num + 1, state.not_raise_num
        ),
    )
    state = state._replace(
        raised=raised,
        not_raise_num=not_raise,
        have_raised=state.have_raised + (action == RAISE),
        folded=jnp.where(action == FOLD, player, state.folded),
    )
    round_over = state.not_raise_num >= 2
    left = jnp.sum(state.deck >= 0)
    top_of_deck = jnp.maximum(left - 1, 0)
    deal = round_over & (state.round_counter == 0)
    return state._replace(
        public=jnp.where(deal, state.deck[top_of_deck], state.public),
        deck=jnp.where(deal, state.deck.at[top_of_deck].set(NO_CARD), state.deck),
        banked=jnp.where(round_over, state.banked + state.raised[0], state.banked),
        raised=jnp.where(round_over, jnp.zeros(2, jnp.int32), state.raised),
        have_raised=jnp.where(round_over, 0, state.have_raised),
        not_raise_num=jnp.where(round_over, 0, state.not_raise_num),
        round_counter=state.round_counter + round_over,
    )


def payoff(state: EnvState) -> jax.Array:
    """Player 0's payoff in big blinds (rlcard's judger: fold, then pair, then rank)."""
    chips = state.banked + state.raised
    pot = jnp.sum(chips).astype(jnp.float32)
    pairs = rank(state.hands) == rank(state.public)
    ranks = rank(state.hands)
    wins_0 = jnp.where(
        state.folded >= 0,
        state.folded == 1,
        jnp.where(pairs[0] | pairs[1], pairs[0], ranks[0] >= ranks[1]),
    )
    winners = jnp.where(
        (state.folded < 0) & ~pairs[0] & ~pairs[1] & (ranks[0] == ranks[1]), 2, 1
    ).astype(jnp.float32)
    won = jnp.where(wins_0, pot / winners, 0.0)
    return (won - chips[0].astype(jnp.float32)) / BIG_BLIND


def observe(state: EnvState) -> jax.Array:
    """rlcard's encoding for player 0: hand rank, public rank, own chips, the other's chips."""
    chips = state.banked + state.raised
    obs = jnp.zeros(36, jnp.float32).at[rank(state.hands[0])].set(1.0)
    obs = jnp.where(state.public >= 0, obs.at[3 + rank(state.public)].set(1.0), obs)
    return obs.at[6 + chips[0]].set(1.0).at[21 + chips[1]].set(1.0)


def _opponent(state: EnvState, draws: Draws) -> tuple[EnvState, Draws]:
    """rlcard's RandomAgent: ``np.random.choice`` over the legal action ids, in order."""
    moves = ~is_over(state)
    ok = legal(state, jnp.int32(1))
    index, draws = draws.choice(jnp.sum(ok), when=moves)
    action = jnp.argmax(jnp.cumsum(ok) > index).astype(jnp.int32)
    acted = _act(state, jnp.int32(1), action)
    return jax.tree_util.tree_map(lambda a, b: jnp.where(moves, a, b), acted, state), draws


def step_with_draws(
    state: EnvState, action: jax.Array, draws: Draws
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array, Draws]:
    ok = legal(state, jnp.int32(0))
    action = jnp.asarray(action, jnp.int32)
    # rlcard's _decode_action: an illegal action is played as check, else fold
    action = jnp.where(ok[action], action, jnp.where(ok[CHECK], CHECK, FOLD))
    state = _act(state, jnp.int32(0), action)
    state, draws = _opponent(state, draws)
    over = is_over(state)
    reward = jnp.where(over, payoff(state), 0.0)
    return state, observe(state), reward, over, jnp.bool_(False), draws


def _deal(key: jax.Array) -> EnvState:
    """A shuffled deck, a card each, the blinds and, when the opponent is the small blind (it
    acts first), its first action.

    The reference deals again while the opponent folds before the agent's first action. The
    cards do not decide that, so this draws the opening directly from the ones it keeps: of
    the six equally likely openings (the agent the small blind: three; the opponent the small
    blind and its call, raise or fold among its legal actions: one each), the five without
    the fold."""
    key, deal = speed_layer.split(key)  # speed layer: hashed keys, draws and shuffle
    key, sub = speed_layer.split(key)
    deck = speed_layer.permutation(deal, DECK).astype(jnp.int32)
    opening, _ = speed_layer.training_draws(sub, 1).integers(0, 5)
    small = jnp.where(opening >= 3, 1, 0)
    state = EnvState(
        deck=jnp.full(DECK, NO_CARD, jnp.int32).at[:4].set(deck[:4]),
        hands=deck[4:][::-1],  # dealt from the end: the agent first
        public=jnp.int32(NO_CARD),
        banked=jnp.int32(0),
        raised=jnp.where(jnp.arange(2) == small, 1, 2).astype(jnp.int32),
        have_raised=jnp.int32(0),
        not_raise_num=jnp.int32(0),
        round_counter=jnp.int32(0),
        folded=jnp.int32(-1),
        key=key,
    )
    opened = _act(state, jnp.int32(1), jnp.where(opening == 4, RAISE, CALL))
    return jax.tree_util.tree_map(lambda a, b: jnp.where(small == 1, a, b), opened, state)


def reset(seed: jax.Array) -> EnvState:
    """Training resets from the port's own key (a deal the reference's adapter keeps)."""
    return _deal(jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32)))


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Training: the opponent draws from the key in the state."""
    key, sub = speed_layer.split(state.key)  # speed layer: hashed keys and draws
    new, obs, reward, terminated, truncated, _ = step_with_draws(
        state, action, speed_layer.training_draws(sub, OPPONENT_DRAWS)
    )
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {
        "deck": state.deck,
        "hands": state.hands,
        "public": state.public,
        "banked": state.banked,
        "raised": state.raised,
        "have_raised": state.have_raised,
        "not_raise_num": state.not_raise_num,
        "round_counter": state.round_counter,
    }


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    f = {k: jnp.asarray(v).astype(jnp.int32) for k, v in fields.items()}
    key = jax.random.fold_in(jax.random.PRNGKey(jnp.sum(f["deck"]).astype(jnp.uint32)), f["public"])
    return EnvState(**f, folded=jnp.int32(-1), key=key)
