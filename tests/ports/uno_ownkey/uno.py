"""UNO against a uniformly random opponent in JAX, drawing from its own ``jax.random`` key the
way gymnax-style libraries do: not through ``envforge.rng.jax_draws.Draws``, so no tape can be
replayed to it (the reshuffle is one ``jax.random`` permutation, not the reference's Fisher-Yates;
the opponent's and the wild colour's choices are ``randint``s). It can only be verified in
distribution mode (``env.toml`` beside it: ``[rng] step = "distribution"``). Written by hand
(PROVENANCE.md) from ``generated/uno/jax/uno.py``: the same rules, another generator.

Cards are numbered like rlcard's actions: ``15 * colour + trait`` (colours r g b y; traits 0-9,
skip, reverse, draw_2, wild, wild_draw_4); a wild card keeps its printed colour in its id and
the colour chosen for it is ``target_color``. Every list (the draw pile bottom first, the played
cards oldest first, each hand in order) is a fixed array of ``CAPACITY`` ids followed by
``NO_CARD``. The agent is player 0; after each of its actions the opponent picks uniformly
among its legal actions until it is the agent's turn again or a hand is empty. When the draw
pile runs out (or holds fewer cards than a draw-2 or wild-draw-4 deals) the played cards are
put under it and it is shuffled. The reward, when the game ends, is +1 if the agent emptied
its hand, else -1.

``step_with_draws`` is the verifier's entry point: it takes the key the driver seeds
(``draws.key``) and returns ``draws`` untouched (nothing is logged).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

CAPACITY = 108
NO_CARD = -1
NUM_ACTIONS = 61
DRAW = 60
SKIP, REVERSE, DRAW_2, WILD, WILD_DRAW_4 = 10, 11, 12, 13, 14
HAND_SIZE = 7
_FAR = 1 << 20
"""A sort key after every hand position."""


def _deck_ids() -> jax.Array:
    """rlcard's ``init_deck`` order: per colour 0, 1 1, ..., 9 9, skips, reverses, draw-2s
    (two each), wild, wild draw 4."""
    ids = []
    for color in range(4):
        for trait in range(10):
            ids += [15 * color + trait] * (1 if trait == 0 else 2)
        for trait in (SKIP, REVERSE, DRAW_2):
            ids += [15 * color + trait] * 2
        ids += [15 * color + WILD, 15 * color + WILD_DRAW_4]
    return jnp.asarray(ids, jnp.int32)


class EnvState(NamedTuple):
    deck: jax.Array  # int32[108]: the draw pile, bottom first (drawn from the end)
    played: jax.Array  # int32[108]: played cards, oldest first
    hands: jax.Array  # int32[2, 108]: the agent's hand, the opponent's
    target: jax.Array  # int32: the card to follow
    target_color: jax.Array  # int32: the colour to follow (chosen, for a wild)
    direction: jax.Array  # int32: +1 or -1
    current: jax.Array  # int32: whose turn (not canonical: the agent's whenever it acts)
    winner: jax.Array  # int32: who emptied their hand (-1: nobody); not canonical
    key: jax.Array  # the port's own generator (training only; not canonical)


def trait(card: jax.Array) -> jax.Array:
    return card % 15


def color(card: jax.Array) -> jax.Array:
    return card // 15


def count(cards: jax.Array) -> jax.Array:
    return jnp.sum(cards >= 0, axis=-1).astype(jnp.int32)


def _append(cards: jax.Array, card: jax.Array, when: jax.Array) -> jax.Array:
    n = jnp.minimum(count(cards), CAPACITY - 1)
    return jnp.where(when, cards.at[n].set(card), cards)


def _remove(cards: jax.Array, index: jax.Array) -> jax.Array:
    """``list.pop(index)``: the later cards close up."""
    at = jnp.arange(CAPACITY)
    shifted = jnp.concatenate([cards[1:], jnp.full(1, NO_CARD, jnp.int32)])
    return jnp.where(at < index, cards, shifted)


def _pop(cards: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``list.pop()``: the last card, and the list without it."""
    top = jnp.maximum(count(cards) - 1, 0)
    return cards[top], cards.at[top].set(NO_CARD)


def legal(state: EnvState, player: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """rlcard's ``get_legal_actions`` for ``player``: (mask[61], the legal ids in rlcard's
    order then the rest, how many are legal). rlcard lists the hand's playable cards in hand
    order, the four wild colours where the first wild card is, and the wild-draw-4 colours
    (where the first one is) only when nothing else is playable, else ``draw``; duplicates
    keep their first place."""
    hand = state.hands[player]
    pos = jnp.arange(CAPACITY)
    held = hand >= 0
    wild_target = trait(state.target) >= WILD
    is_wild = held & (trait(hand) == WILD)
    is_wd4 = held & (trait(hand) == WILD_DRAW_4)
    plain = held & (trait(hand) < WILD)
    match = plain & (
        (color(hand) == state.target_color) | (~wild_target & (trait(hand) == trait(state.target)))
    )
    keys = jnp.full(NUM_ACTIONS + 1, _FAR, jnp.int32)
    keys = keys.at[jnp.where(match, hand, NUM_ACTIONS)].min(4 * pos)[:NUM_ACTIONS]
    first_wild = jnp.min(jnp.where(is_wild, pos, _FAR // 8))
    first_wd4 = jnp.min(jnp.where(is_wd4, pos, _FAR // 8))
    colors = jnp.arange(4)
    keys = keys.at[15 * colors + WILD].set(
        jnp.where(first_wild < CAPACITY, 4 * first_wild + colors, _FAR)
    )
    some = jnp.any(keys < _FAR)
    keys = keys.at[15 * colors + WILD_DRAW_4].set(
        jnp.where(~some & (first_wd4 < CAPACITY), 4 * first_wd4 + colors, _FAR)
    )
    keys = keys.at[DRAW].set(jnp.where(jnp.any(keys < _FAR), _FAR, 0))
    mask = keys < _FAR
    return mask, jnp.argsort(keys, stable=True).astype(jnp.int32), jnp.sum(mask).astype(jnp.int32)


def _replace_deck(state: EnvState, when: jax.Array, key: jax.Array) -> EnvState:
    """The played cards onto the deck, then the deck shuffled: a ``jax.random`` permutation of
    its ``n`` cards (each card a uniform key, sorted; the empty slots stay last)."""
    at = jnp.arange(CAPACITY)
    nd, npl = count(state.deck), count(state.played)
    joined = jnp.where(at < nd, state.deck, state.played[jnp.clip(at - nd, 0, CAPACITY - 1)])
    joined = jnp.where(at < nd + npl, joined, NO_CARD)
    deck = jnp.where(when, joined, state.deck)
    n = count(deck)
    order = jnp.argsort(jnp.where(at < n, jax.random.uniform(key, (CAPACITY,)), 2.0))
    deck = jnp.where(when, deck[order], deck)
    played = jnp.where(when, jnp.full(CAPACITY, NO_CARD, jnp.int32), state.played)
    return state._replace(deck=deck, played=played)


def _deal(state: EnvState, player: jax.Array, n: int, when: jax.Array) -> EnvState:
    """``deal_cards``: ``n`` cards from the end of the deck onto the end of the hand."""
    hands = state.hands
    deck = state.deck
    for _ in range(n):
        card, rest = _pop(deck)
        deck = jnp.where(when, rest, deck)
        hands = hands.at[player].set(_append(hands[player], card, when))
    return state._replace(deck=deck, hands=hands)


def _action_card(
    state: EnvState, player: jax.Array, card: jax.Array, chosen: jax.Array, when: jax.Array,
    key: jax.Array,
) -> EnvState:  # fmt: skip
    """rlcard's ``_preform_non_number_action``: skip, reverse, draw-2, wild, wild-draw-4."""
    t = trait(card)
    other = 1 - player
    direction = jnp.where(t == REVERSE, -state.direction, state.direction)
    draw_2, draw_4 = when & (t == DRAW_2), when & (t == WILD_DRAW_4)
    short = (draw_2 & (count(state.deck) < 2)) | (draw_4 & (count(state.deck) < 4))
    new = _replace_deck(state, short, key)
    new = _deal(new, other, 2, draw_2)
    new = _deal(new, other, 4, draw_4)
    again = (t == SKIP) | (t == DRAW_2) | (t == WILD_DRAW_4)
    new = new._replace(
        direction=direction,
        current=jnp.where(again, player, other),
        target=card,
        target_color=chosen,
    )
    return jax.tree_util.tree_map(lambda a, b: jnp.where(when, a, b), new, state)


def proceed(state: EnvState, player: jax.Array, action: jax.Array, key: jax.Array) -> EnvState:
    """One legal action of ``player`` (rlcard's ``proceed_round``).

    A card: the first card in hand with this id (a wild: with this trait) leaves the hand for
    the played pile. ``draw`` (``_perform_draw_action``): the deck is replaced if empty and its
    top card drawn; a wild is played at once in a random colour (no action of its own), a card
    of the colour to follow is played (its action done), any other goes to the hand. A card
    played becomes the target; an action card's effect follows (``_action_card``)."""
    is_draw = action == DRAW
    # drawing
    k_empty, k_color, k_short = jax.random.split(key, 3)
    drew = _replace_deck(state, is_draw & (count(state.deck) == 0), k_empty)
    drawn, deck = _pop(drew.deck)
    wild_drawn = trait(drawn) >= WILD
    picked = jax.random.randint(k_color, (), 0, 4)
    same = ~wild_drawn & (color(drawn) == state.target_color)
    goes_down = wild_drawn | same
    hand = drew.hands[player]
    after_draw = drew._replace(
        deck=deck,
        played=_append(drew.played, drawn, goes_down),
        hands=drew.hands.at[player].set(_append(hand, drawn, ~goes_down)),
    )
    # playing a card from the hand
    hand = state.hands[player]
    wild_played = trait(action) >= WILD
    hit = (hand >= 0) & jnp.where(wild_played, trait(hand) == trait(action), hand == action)
    index = jnp.argmax(hit)
    held = hand[index]
    hand = _remove(hand, index)
    after_play = state._replace(
        hands=state.hands.at[player].set(hand),
        played=_append(state.played, held, jnp.bool_(True)),
        winner=jnp.where(count(hand) == 0, player, state.winner),
    )
    # both: the card that goes down, and what it does
    base = jax.tree_util.tree_map(lambda a, b: jnp.where(is_draw, a, b), after_draw, after_play)
    card = jnp.where(is_draw, drawn, held)
    chosen = jnp.where(
        is_draw,
        jnp.where(wild_drawn, picked, color(drawn)),
        jnp.where(wild_played, color(action), color(held)),
    )
    down = ~is_draw | goes_down
    acts = (trait(card) >= SKIP) & jnp.where(is_draw, same, True)
    acted = _action_card(base, player, card, chosen, acts, k_short)
    plain = base._replace(
        current=1 - player,
        target=jnp.where(down, card, base.target),
        target_color=jnp.where(down, chosen, base.target_color),
    )
    out = jax.tree_util.tree_map(lambda a, b: jnp.where(acts, a, b), acted, plain)
    return out


def is_over(state: EnvState) -> jax.Array:
    return state.winner >= 0


def _turns(state: EnvState, action: jax.Array, agent_moves: jax.Array, key: jax.Array) -> EnvState:
    """The agent's (legal) ``action`` if ``agent_moves``, then rlcard's RandomAgent
    (``np.random.choice`` over its legal ids, in rlcard's order) while it is player 1's turn
    and nobody has won: one loop, so that ``proceed`` is traced once."""

    def cond(carry: tuple[EnvState, jax.Array, jax.Array]) -> jax.Array:
        s, _, first = carry
        return first | ((s.current == 1) & ~is_over(s))

    def body(carry: tuple[EnvState, jax.Array, jax.Array]) -> tuple:
        s, k, first = carry
        k, k_pick, k_turn = jax.random.split(k, 3)
        _, order, n = legal(s, jnp.int32(1))
        index = jax.random.randint(k_pick, (), 0, jnp.maximum(n, 1))
        player = jnp.where(first, 0, 1).astype(jnp.int32)
        s = proceed(s, player, jnp.where(first, action, order[index]), k_turn)
        return s, k, jnp.bool_(False)

    state, _, _ = jax.lax.while_loop(cond, body, (state, key, jnp.asarray(agent_moves)))
    return state


def observe(state: EnvState) -> jax.Array:
    """rlcard's planes for player 0, flattened (plane * 60 + card id): holds none, one, two of
    each card (any wild of a kind: "one", in every colour), the target by its id; then the
    agent's legal-action mask."""
    hand = state.hands[0]
    counts = jnp.zeros(NUM_ACTIONS, jnp.int32).at[jnp.where(hand >= 0, hand, DRAW)].add(1)[:60]
    ids = jnp.arange(60)
    kind_held = jnp.zeros(15, bool).at[jnp.where(hand >= 0, trait(hand), 0)].max(hand >= 0)
    wild_kind = trait(ids) >= WILD
    held = jnp.where(wild_kind, kind_held[trait(ids)].astype(jnp.int32), counts)
    planes = jnp.stack([held == 0, held == 1, (held == 2) & ~wild_kind, ids == state.target])
    mask, _, _ = legal(state, jnp.int32(0))
    return jnp.concatenate([planes.reshape(-1), mask]).astype(jnp.float32)


def _step(state: EnvState, action: jax.Array, key: jax.Array) -> tuple:
    mask, order, n = legal(state, jnp.int32(0))
    action = jnp.asarray(action, jnp.int32)
    illegal = ~mask[jnp.clip(action, 0, NUM_ACTIONS - 1)]
    # an illegal id is played as a uniformly random legal one
    k_illegal, k_turns = jax.random.split(key)
    index = jax.random.randint(k_illegal, (), 0, jnp.maximum(n, 1))
    action = jnp.where(illegal, order[index], action)
    state = _turns(state, action, jnp.bool_(True), k_turns)
    over = is_over(state)
    reward = jnp.where(over, jnp.where(state.winner == 0, 1.0, -1.0), 0.0)
    return state, observe(state), reward, over, jnp.bool_(False)


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the port's own draws from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def _new_game(key: jax.Array) -> EnvState:
    """A shuffled deck, seven cards each (dealt from the end: the agent first), the top card
    flipped (a wild draw 4 goes back and the deck is shuffled again; a wild gets a random
    colour) and performed, then the opponent's turns if it starts."""
    key, deal, flip, pick, first = jax.random.split(key, 5)
    deck = jax.random.permutation(deal, _deck_ids())
    hands = jnp.full((2, CAPACITY), NO_CARD, jnp.int32)
    hands = hands.at[0, :HAND_SIZE].set(deck[::-1][:HAND_SIZE])
    hands = hands.at[1, :HAND_SIZE].set(deck[::-1][HAND_SIZE : 2 * HAND_SIZE])
    left = CAPACITY - 2 * HAND_SIZE
    deck = jnp.full(CAPACITY, NO_CARD, jnp.int32).at[:left].set(deck[:left])

    def redo(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        d, k = carry
        k, sub = jax.random.split(k)
        order = jax.random.permutation(sub, left)
        return d.at[:left].set(d[:left][order]), k

    deck, _ = jax.lax.while_loop(lambda c: trait(c[0][left - 1]) == WILD_DRAW_4, redo, (deck, flip))
    top, deck = _pop(deck)
    chosen = jnp.where(trait(top) == WILD, jax.random.randint(pick, (), 0, 4), color(top))
    state = EnvState(
        deck=deck,
        played=jnp.full(CAPACITY, NO_CARD, jnp.int32).at[0].set(top),
        hands=hands,
        target=top,
        target_color=chosen.astype(jnp.int32),
        direction=jnp.where(trait(top) == REVERSE, -1, 1).astype(jnp.int32),
        current=jnp.where((trait(top) == SKIP) | (trait(top) == REVERSE), 1, 0).astype(jnp.int32),
        winner=jnp.int32(-1),
        key=key,
    )
    state = _deal(state, jnp.int32(0), 2, trait(top) == DRAW_2)
    state = _turns(state, jnp.int32(0), jnp.bool_(False), first)
    return state


def reset(seed: jax.Array) -> EnvState:
    """Training resets from the port's own key; dealt again while the game ends before the
    agent's first action (the reference's adapter does the same). One deal in the loop, so
    that it is traced once: the loop starts from an empty game marked over."""
    empty = jnp.full(CAPACITY, NO_CARD, jnp.int32)
    start = EnvState(
        deck=empty,
        played=empty,
        hands=jnp.stack([empty, empty]),
        target=jnp.int32(0),
        target_color=jnp.int32(0),
        direction=jnp.int32(1),
        current=jnp.int32(0),
        winner=jnp.int32(0),
        key=jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32)),
    )
    return jax.lax.while_loop(is_over, lambda s: _new_game(s.key), start)


def step(state: EnvState, action: jax.Array) -> tuple:
    """Training: every draw from the key in the state."""
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated = _step(state, action, sub)
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {
        "deck": state.deck,
        "played": state.played,
        "hands": state.hands,
        "target": state.target,
        "target_color": state.target_color,
        "direction": state.direction,
    }


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    f = {k: jnp.asarray(v).astype(jnp.int32) for k, v in fields.items()}
    key = jax.random.fold_in(jax.random.PRNGKey(jnp.sum(f["deck"]).astype(jnp.uint32)), f["target"])
    return EnvState(**f, current=jnp.int32(0), winner=jnp.int32(-1), key=key)
