"""Blackjack-v1 (``natural=True, sab=False``) in JAX, drawing from its own ``jax.random`` key the
way gymnax-style libraries do: not through ``envforge.rng.jax_draws.Draws``, so no tape can be
replayed to it, and its draws are not the reference's (a hit takes one ``randint``; a stick
deals the dealer ``DEALER_DRAWS`` cards at once and uses as many as the dealer rule needs).
It can only be verified in distribution mode (``env.toml`` beside it: ``[rng] step =
"distribution"``). Written by hand (PROVENANCE.md).

``step_with_draws`` is the verifier's entry point: it takes the key the driver seeds
(``draws.key``) and returns ``draws`` untouched (nothing is logged).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

DECK = jnp.asarray([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10], jnp.int32)
HAND = 24
DEALER_DRAWS = 12
"""Cards dealt to the dealer at a stick; it uses those its rule asks for (at most 10 from one
card)."""


class EnvState(NamedTuple):
    player: jax.Array  # int32[HAND] cards, then 0
    dealer: jax.Array  # int32[HAND] cards, then 0
    key: jax.Array


def _count(hand: jax.Array) -> jax.Array:
    return jnp.sum(hand > 0).astype(jnp.int32)


def usable_ace(hand: jax.Array) -> jax.Array:
    return jnp.any(hand == 1) & (jnp.sum(hand) + 10 <= 21)


def sum_hand(hand: jax.Array) -> jax.Array:
    return jnp.sum(hand) + jnp.where(usable_ace(hand), 10, 0)


def is_natural(hand: jax.Array) -> jax.Array:
    return (_count(hand) == 2) & jnp.any(hand == 1) & jnp.any(hand == 10)


def _add(hand: jax.Array, card: jax.Array, when: jax.Array) -> jax.Array:
    slot = jnp.minimum(_count(hand), HAND - 1)
    return jnp.where(when, hand.at[slot].set(card), hand)


def observe(state: EnvState) -> jax.Array:
    return jnp.stack(
        [sum_hand(state.player), state.dealer[0], usable_ace(state.player).astype(jnp.int32)]
    ).astype(jnp.float32)


def reset(seed: jax.Array) -> EnvState:
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    key, sub = jax.random.split(key)
    cards = DECK[jax.random.randint(sub, (4,), 0, 13)]
    empty = jnp.zeros(HAND, jnp.int32)
    return EnvState(empty.at[:2].set(cards[2:]), empty.at[:2].set(cards[:2]), key)


def _step(state: EnvState, action: jax.Array, key: jax.Array) -> tuple:
    hit_key, dealer_key = jax.random.split(key)
    hit = action == 1
    player = _add(state.player, DECK[jax.random.randint(hit_key, (), 0, 13)], hit)
    bust = sum_hand(player) > 21
    dealt = DECK[jax.random.randint(dealer_key, (DEALER_DRAWS,), 0, 13)]

    def dealer_takes(i: int, dealer: jax.Array) -> jax.Array:
        return _add(dealer, dealt[i], ~hit & (sum_hand(dealer) < 17))

    dealer = jax.lax.fori_loop(0, DEALER_DRAWS, dealer_takes, state.dealer)
    player_total, dealer_total = sum_hand(player), sum_hand(dealer)
    player_score = jnp.where(player_total > 21, 0, player_total)
    dealer_score = jnp.where(dealer_total > 21, 0, dealer_total)
    compared = jnp.sign(player_score - dealer_score).astype(jnp.float32)
    compared = jnp.where(is_natural(player) & (compared == 1.0), 1.5, compared)
    reward = jnp.where(hit, jnp.where(bust, -1.0, 0.0), compared)
    new = EnvState(player, dealer, state.key)
    return new, observe(new), reward, ~hit | bust, jnp.bool_(False)


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the port's own draws from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def step(state: EnvState, action: jax.Array) -> tuple:
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated = _step(state, action, sub)
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {"player": state.player, "dealer": state.dealer}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    player = jnp.asarray(fields["player"]).astype(jnp.int32)
    dealer = jnp.asarray(fields["dealer"]).astype(jnp.int32)
    key = jax.random.fold_in(
        jax.random.PRNGKey(jnp.sum(player).astype(jnp.uint32)), jnp.sum(dealer)
    )
    return EnvState(player, dealer, key)
