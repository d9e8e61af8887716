"""Leduc Hold'em against a uniformly random opponent in JAX, drawing from its own
``jax.random`` key the way gymnax-style libraries do: not through ``envforge.rng.jax_draws.Draws``,
so no tape can be replayed to it (the opponent's choice is one ``randint`` over its legal
actions, not the reference's ``np.random.choice``). It can only be verified in distribution mode
(``env.toml`` beside it: ``[rng] step = "distribution"``). Written by hand
(PROVENANCE.md) from ``generated/leduc/jax/leduc.py``: the same rules, another generator.

Six cards, 0..5 = SJ HJ SQ HQ SK HK (rank = card // 2). A betting round: call, raise (at most
two a round, by 2 in the first round and 4 in the second), fold or check; it ends when both
players have called or checked in turn, and after the first one the public card is dealt from
the end of the deck. The agent is player 0; after each of its actions the opponent (player 1)
picks uniformly among its legal actions, if the game is not over. The reward, when the game
ends, is player 0's payoff in big blinds: the pot to whoever did not fold, else to the hand
that pairs the public card, else to the higher rank, split on a tie.

``step_with_draws`` is the verifier's entry point: it takes the key the driver seeds
(``draws.key``) and returns ``draws`` untouched (nothing is logged).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

CALL, RAISE, FOLD, CHECK = 0, 1, 2, 3
NO_CARD = -1
DECK = 6
BIG_BLIND = 2
RAISES_PER_ROUND = 2


class EnvState(NamedTuple):
    deck: jax.Array  # int32[6]: cards left, bottom first, then NO_CARD
    hands: jax.Array  # int32[2]: the agent's card, the opponent's
    public: jax.Array  # int32: the public card, or NO_CARD in the first round
    banked: jax.Array  # int32: chips each player put in during finished rounds
    raised: jax.Array  # int32[2]: chips each player put in during this round
    have_raised: jax.Array  # int32: raises so far this round
    not_raise_num: jax.Array  # int32: calls and checks in a row this round
    round_counter: jax.Array  # int32: finished rounds (2: the game is over)
    folded: jax.Array  # int32: who folded (-1: nobody); not canonical
    key: jax.Array  # the port's own generator (training only; not canonical)


def legal(state: EnvState, player: jax.Array) -> jax.Array:
    """bool[4]: call, raise, fold, check."""
    top = jnp.max(state.raised)
    mine = state.raised[player]
    return jnp.stack(
        [mine != top, state.have_raised < RAISES_PER_ROUND, jnp.bool_(True), mine >= top]
    )


def is_over(state: EnvState) -> jax.Array:
    return (state.folded >= 0) | (state.round_counter >= 2)


def _act(state: EnvState, player: jax.Array, action: jax.Array) -> EnvState:
    """One legal action of ``player``, then the end of the round if it ends."""
    top = jnp.max(state.raised)
    amount = jnp.where(state.round_counter >= 1, 2 * BIG_BLIND, BIG_BLIND)
    bets = (action == CALL) | (action == RAISE)
    bet = jnp.where(action == RAISE, top + amount, top)
    passes = (action == CALL) | (action == CHECK)
    state = state._replace(
        raised=jnp.where(bets, state.raised.at[player].set(bet), state.raised),
        not_raise_num=jnp.where(action == RAISE, 1, state.not_raise_num + passes),
        have_raised=state.have_raised + (action == RAISE),
        folded=jnp.where(action == FOLD, player, state.folded),
    )
    done = state.not_raise_num >= 2
    top_of_deck = jnp.maximum(jnp.sum(state.deck >= 0) - 1, 0)
    deal = done & (state.round_counter == 0)
    return state._replace(
        public=jnp.where(deal, state.deck[top_of_deck], state.public),
        deck=jnp.where(deal, state.deck.at[top_of_deck].set(NO_CARD), state.deck),
        banked=jnp.where(done, state.banked + state.raised[0], state.banked),
        raised=jnp.where(done, jnp.zeros(2, jnp.int32), state.raised),
        have_raised=jnp.where(done, 0, state.have_raised),
        not_raise_num=jnp.where(done, 0, state.not_raise_num),
        round_counter=state.round_counter + done,
    )


def payoff(state: EnvState) -> jax.Array:
    """Player 0's payoff in big blinds: fold, then pair, then rank."""
    chips = state.banked + state.raised
    pot = jnp.sum(chips).astype(jnp.float32)
    ranks = state.hands // 2
    pairs = ranks == state.public // 2
    nobody_folded = state.folded < 0
    wins = jnp.where(
        nobody_folded, jnp.where(pairs.any(), pairs[0], ranks[0] >= ranks[1]), state.folded == 1
    )
    tie = nobody_folded & ~pairs.any() & (ranks[0] == ranks[1])
    won = jnp.where(wins, pot / jnp.where(tie, 2.0, 1.0), 0.0)
    return (won - chips[0].astype(jnp.float32)) / BIG_BLIND


def observe(state: EnvState) -> jax.Array:
    """Hand rank, public rank, own chips, the other's chips (one-hot each)."""
    chips = state.banked + state.raised
    obs = jnp.zeros(36, jnp.float32).at[state.hands[0] // 2].set(1.0)
    obs = jnp.where(state.public >= 0, obs.at[3 + state.public // 2].set(1.0), obs)
    return obs.at[6 + chips[0]].set(1.0).at[21 + chips[1]].set(1.0)


def _opponent(state: EnvState, key: jax.Array) -> EnvState:
    """A uniformly random legal action of player 1, unless the game is over."""
    ok = legal(state, jnp.int32(1))
    index = jax.random.randint(key, (), 0, jnp.sum(ok))
    action = jnp.argmax(jnp.cumsum(ok) > index).astype(jnp.int32)
    acted = _act(state, jnp.int32(1), action)
    moves = ~is_over(state)
    return jax.tree_util.tree_map(lambda a, b: jnp.where(moves, a, b), acted, state)


def _step(state: EnvState, action: jax.Array, key: jax.Array) -> tuple:
    ok = legal(state, jnp.int32(0))
    action = jnp.asarray(action, jnp.int32)
    # an illegal action is played as check, else fold
    action = jnp.where(ok[action], action, jnp.where(ok[CHECK], CHECK, FOLD))
    state = _opponent(_act(state, jnp.int32(0), action), key)
    over = is_over(state)
    reward = jnp.where(over, payoff(state), 0.0)
    return state, observe(state), reward, over, jnp.bool_(False)


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the port's own draws from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def step(state: EnvState, action: jax.Array) -> tuple:
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated = _step(state, action, sub)
    return new._replace(key=key), obs, reward, terminated, truncated


def _deal(key: jax.Array) -> EnvState:
    """A shuffled deck, a card each, the blinds (the small blind, who acts first, at random),
    and the opponent's first action if it is first."""
    key, deal, blind, first = jax.random.split(key, 4)
    deck = jax.random.permutation(deal, DECK).astype(jnp.int32)
    small = jax.random.randint(blind, (), 0, 2)
    state = EnvState(
        deck=jnp.full(DECK, NO_CARD, jnp.int32).at[:4].set(deck[:4]),
        hands=deck[4:][::-1],
        public=jnp.int32(NO_CARD),
        banked=jnp.int32(0),
        raised=jnp.where(jnp.arange(2) == small, 1, 2).astype(jnp.int32),
        have_raised=jnp.int32(0),
        not_raise_num=jnp.int32(0),
        round_counter=jnp.int32(0),
        folded=jnp.int32(-1),
        key=key,
    )
    opened = _opponent(state, first)
    return jax.tree_util.tree_map(lambda a, b: jnp.where(small == 1, a, b), opened, state)


def reset(seed: jax.Array) -> EnvState:
    """Dealt again while the opponent folds before the agent's first action."""
    state = _deal(jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32)))
    return jax.lax.while_loop(is_over, lambda s: _deal(s.key), state)


CANONICAL = ("deck", "hands", "public", "banked", "raised", "have_raised", "not_raise_num",
             "round_counter")  # fmt: skip


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {name: getattr(state, name) for name in CANONICAL}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    f = {k: jnp.asarray(v).astype(jnp.int32) for k, v in fields.items()}
    key = jax.random.fold_in(jax.random.PRNGKey(jnp.sum(f["deck"]).astype(jnp.uint32)), f["public"])
    return EnvState(**f, folded=jnp.int32(-1), key=key)
