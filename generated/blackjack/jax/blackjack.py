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

from envforge.kit import Draws

DECK = jnp.asarray([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10], jnp.int32)
HAND = 24
"""Slots per hand (the spec's shape): room for any hand a game or a drawn state reaches."""
DEALER_DRAWS = 12
"""Most cards a dealer draws in one stick (from one card it needs at most 10)."""
NATURAL = True
"""Pay 1.5 for a winning natural (the reference's ``natural``)."""
SAB = False
"""Sutton and Barto's rule: a natural wins outright unless the dealer has one too."""


class EnvState(NamedTuple):
    player: jax.Array  # int32[HAND] cards, then 0
    dealer: jax.Array  # int32[HAND] cards, then 0
    key: jax.Array  # the port's own generator (training only; not canonical)


def _count(hand: jax.Array) -> jax.Array:
    return jnp.sum(hand > 0).astype(jnp.int32)


def usable_ace(hand: jax.Array) -> jax.Array:
    return jnp.any(hand == 1) & (jnp.sum(hand) + 10 <= 21)


def sum_hand(hand: jax.Array) -> jax.Array:
    return jnp.sum(hand) + jnp.where(usable_ace(hand), 10, 0)


def score(hand: jax.Array) -> jax.Array:
    total = sum_hand(hand)
    return jnp.where(total > 21, 0, total)


def is_natural(hand: jax.Array) -> jax.Array:
    return (_count(hand) == 2) & jnp.any(hand == 1) & jnp.any(hand == 10)


def _add(hand: jax.Array, card: jax.Array, when: jax.Array) -> jax.Array:
    slot = jnp.minimum(_count(hand), HAND - 1)
    return jnp.where(when, hand.at[slot].set(card), hand)


def observe(state: EnvState) -> jax.Array:
    return jnp.stack(
        [
            sum_hand(state.player),
            state.dealer[0],
            usable_ace(state.player).astype(jnp.int32),
        ]
    ).astype(jnp.float32)


def reset(seed: jax.Array) -> EnvState:
    """Training resets: two cards each from the port's own key."""
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    key, sub = jax.random.split(key)
    cards = DECK[jax.random.randint(sub, (4,), 0, 13)]
    empty = jnp.zeros(HAND, jnp.int32)
    return EnvState(empty.at[:2].set(cards[2:]), empty.at[:2].set(cards[:2]), key)


def step_with_draws(
    state: EnvState, action: jax.Array, draws: Draws
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array, Draws]:
    hit = action == 1
    index, draws = draws.choice(13, when=hit)
    player = _add(state.player, DECK[index], hit)
    bust = sum_hand(player) > 21

    def dealer_draw(_: int, carry: tuple[jax.Array, Draws]) -> tuple[jax.Array, Draws]:
        dealer, draws = carry
        needs = ~hit & (sum_hand(dealer) < 17)
        index, draws = draws.choice(13, when=needs)
        return _add(dealer, DECK[index], needs), draws

    dealer, draws = jax.lax.fori_loop(0, DEALER_DRAWS, dealer_draw, (state.dealer, draws))
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
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated, _ = step_with_draws(
        state, action, Draws.from_key(sub, DEALER_DRAWS + 1)
    )
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"player": state.player, "dealer": state.dealer}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    player = jnp.asarray(fields["player"]).astype(jnp.int32)
    dealer = jnp.asarray(fields["dealer"]).astype(jnp.int32)
    key = jax.random.fold_in(jax.random.PRNGKey(jnp.sum(player).astype(jnp.uint32)), jnp.sum(dealer))
    return EnvState(player, dealer, key)
