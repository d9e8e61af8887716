"""Blackjack-v1 (``natural=True, sab=False``) in JAX, ported by hand from gymnasium 1.4.0
``envs/toy_text/blackjack.py``.

Cards come from an infinite deck: each is ``DECK[i]`` for a choice ``i`` among 13 (ace = 1,
2-10, three more 10s for the faces), as the reference's ``np_random.choice(deck)``. Hands are
fixed arrays of ``HAND`` slots, the cards first and 0 (no card) after them. A hit draws one
card for the player; a stick plays the dealer out, one card at a time while the dealer's hand
is worth less than 17, then compares scores (a natural pays 1.5 when ``NATURAL`` and it wins).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from envforge.kit import Draws, speed_layer

DECK = jnp.asarray([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10], jnp.int32)
HAND = 24
"""Slots per hand (the spec's shape): room for any hand a game or a drawn state reaches."""
DEALER_DRAWS = 12
"""Most cards a dealer draws in one stick (from one card it needs at most 10)."""
NATURAL = True
"""Pay 1.5 for a winning natural (the reference's ``natural``)."""
SAB = False
"""Sutton and Barto's rule: a natural wins outright unless the dealer has one too."""


class Hand(NamedTuple):
    """A hand's cards (``HAND`` slots, the cards first, then 0) and what the rules read from
    them, kept up to date as cards are added: how many cards, their sum, whether one is an ace."""

    cards: jax.Array  # int32[HAND]
    count: jax.Array  # int32
    total: jax.Array  # int32: the cards' sum, aces as 1
    ace: jax.Array  # bool


class EnvState(NamedTuple):
    player: Hand
    dealer: Hand
    key: jax.Array  # the port's own generator (training only; not canonical)


def hand_of(cards: jax.Array) -> Hand:
    cards = jnp.asarray(cards).astype(jnp.int32)
    return Hand(cards, jnp.sum(cards > 0).astype(jnp.int32), jnp.sum(cards), jnp.any(cards == 1))


def usable_ace(hand: Hand) -> jax.Array:
    return hand.ace & (hand.total + 10 <= 21)


def sum_hand(hand: Hand) -> jax.Array:
    return hand.total + jnp.where(usable_ace(hand), 10, 0)


def score(hand: Hand) -> jax.Array:
    total = sum_hand(hand)
    return jnp.where(total > 21, 0, total)


def is_natural(hand: Hand) -> jax.Array:
    # two cards, an ace (1) and a 10
    return (hand.count == 2) & hand.ace & (hand.total == 11)


def _counted(hand: Hand, card: jax.Array, when: jax.Array) -> Hand:
    """``hand``'s count, sum and ace with ``card`` added when ``when`` (its slots unchanged)."""
    return hand._replace(
        count=hand.count + when,
        total=hand.total + jnp.where(when, card, 0),
        ace=hand.ace | (when & (card == 1)),
    )


def _add(hand: Hand, card: jax.Array, when: jax.Array) -> Hand:
    slot = jnp.minimum(hand.count, HAND - 1)
    cards = jnp.where(when & (jnp.arange(HAND) == slot), card, hand.cards)
    return _counted(hand, card, when)._replace(cards=cards)


def observe(state: EnvState) -> jax.Array:
    return jnp.stack(
        [
            sum_hand(state.player),
            state.dealer.cards[0],
            usable_ace(state.player).astype(jnp.int32),
        ]
    ).astype(jnp.float32)


def reset(seed: jax.Array) -> EnvState:
    """Training resets: two cards each from the port's own key."""
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    key, sub = speed_layer.split(key)  # speed layer: hashed keys and draws
    draws = speed_layer.training_draws(sub, 4)
    cards = []
    for _ in range(4):
        index, draws = draws.choice(13)
        cards.append(DECK[index])
    empty = jnp.zeros(HAND, jnp.int32)
    dealer, player = empty.at[:2].set(jnp.stack(cards[:2])), empty.at[:2].set(jnp.stack(cards[2:]))
    return EnvState(hand_of(player), hand_of(dealer), key)


def step_with_draws(
    state: EnvState, action: jax.Array, draws: Draws
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array, Draws]:
    hit = action == 1
    index, draws = draws.choice(13, when=hit)
    player = _add(state.player, DECK[index], hit)
    bust = sum_hand(player) > 21

    # The dealer draws while its hand is worth less than 17: the loop counts each card into
    # the hand and keeps it in ``drawn``; once the dealer stops it stops for good, so the
    # first ``count - state.dealer.count`` of them go into the hand's next slots.
    def dealer_draw(
        i: jax.Array, carry: tuple[Hand, jax.Array, Draws]
    ) -> tuple[Hand, jax.Array, Draws]:
        dealer, drawn, draws = carry
        needs = ~hit & (sum_hand(dealer) < 17)
        index, draws = draws.choice(13, when=needs)
        card = DECK[index]
        return _counted(dealer, card, needs), drawn.at[i].set(card), draws

    drawn = jnp.zeros(DEALER_DRAWS, jnp.int32)
    dealer, drawn, draws = jax.lax.fori_loop(
        0, DEALER_DRAWS, dealer_draw, (state.dealer, drawn, draws)
    )
    after = jnp.arange(HAND) - state.dealer.count  # a slot's place after the dealer's cards
    new_card = (after >= 0) & (after < dealer.count - state.dealer.count)
    cards = jnp.where(new_card, drawn[jnp.clip(after, 0, DEALER_DRAWS - 1)], state.dealer.cards)
    dealer = dealer._replace(cards=cards)

    player_score, dealer_score = score(player), score(dealer)
    compared = jnp.sign(player_score - dealer_score).astype(jnp.float32)
    natural = is_natural(player)
    if SAB:
        compared = jnp.where(natural & ~is_natural(dealer), 1.0, compared)
    elif NATURAL:
        compared = jnp.where(natural & (compared == 1.0), 1.5, compared)
    reward = jnp.where(hit, jnp.where(bust, -1.0, 0.0), compared)
    terminated = ~hit | bust
    new = EnvState(player, dealer, state.key)
    return new, observe(new), reward, terminated, jnp.bool_(False), draws


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Training: cards come from the key in the state."""
    key, sub = speed_layer.split(state.key)  # speed layer: hashed keys and draws
    new, obs, reward, terminated, truncated, _ = step_with_draws(
        state, action, speed_layer.training_draws(sub, DEALER_DRAWS + 1)
    )
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"player": state.player.cards, "dealer": state.dealer.cards}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    player = jnp.asarray(fields["player"]).astype(jnp.int32)
    dealer = jnp.asarray(fields["dealer"]).astype(jnp.int32)
    key = jax.random.fold_in(
        jax.random.PRNGKey(jnp.sum(player).astype(jnp.uint32)), jnp.sum(dealer)
    )
    return EnvState(hand_of(player), hand_of(dealer), key)
