"""UNO against a uniformly random opponent, in JAX: a hand port of rlcard 1.2.0's
``games/uno`` (dealer, round, game), ``envs/uno.py`` (observation) and
``agents/random_agent.py``, with the single-agent adapter of ``references/uno/uno.py``.

Cards are numbered like rlcard's actions: ``15 * colour + trait`` (colours r g b y; traits 0-9,
skip, reverse, draw_2, wild, wild_draw_4); a wild card keeps its printed colour in its id and
the colour chosen for it is ``target_color``. Every list (the draw pile bottom first, the played
cards oldest first, each hand in order) is a fixed array of ``CAPACITY`` ids followed by
``NO_CARD``. The agent is player 0; after each of its actions the opponent picks uniformly
among its legal actions (in rlcard's order) until it is the agent's turn again or a hand is
empty. The reward, when the game ends, is +1 if the agent emptied its hand, else -1.

Randomness inside a step goes through ``Draws``: the opponent's choice among its legal actions,
the agent's illegal action replaced by a random legal one, the colour of a wild drawn from the
deck, and the Fisher-Yates reshuffle of the played cards into the deck (``integers(0, i + 1)``
for i = n - 1 .. 1, swapping from the end), in the order rlcard draws them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from envforge.kit import Draws, speed_layer

CAPACITY = 108
NO_CARD = -1
NUM_ACTIONS = 61
DRAW = 60
SKIP, REVERSE, DRAW_2, WILD, WILD_DRAW_4 = 10, 11, 12, 13, 14
HAND_SIZE = 7
TRAIN_LOG = 1
"""Slots of the draw log in training (``Draws.from_key``): the log is read only under
verification, and a draw past the log is still drawn, just not logged. A 256-slot log (the
spec's tape size) made a training step 6x slower at B=1024: every draw of a reshuffle wrote
five [B, 256] arrays."""
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
    # len() of each list, kept beside it as Python's list keeps it (not canonical): counting a
    # 108-card array is a reduction, ~25 of them a turn
    n_deck: jax.Array  # int32: cards in ``deck``
    n_played: jax.Array  # int32: cards in ``played``
    n_hands: jax.Array  # int32[2]: cards in each hand


def trait(card: jax.Array) -> jax.Array:
    return card % 15


def color(card: jax.Array) -> jax.Array:
    return card // 15


def count(cards: jax.Array) -> jax.Array:
    return jnp.sum(cards >= 0, axis=-1).astype(jnp.int32)


def _append(
    cards: jax.Array, n: jax.Array, card: jax.Array, when: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``list.append(card)`` if ``when``, on a list of ``n`` cards: the list and its length."""
    at = jnp.minimum(n, CAPACITY - 1)
    return cards.at[at].set(jnp.where(when, card, cards[at])), n + (when & (card >= 0))


def _remove(cards: jax.Array, index: jax.Array) -> jax.Array:
    """``list.pop(index)``: the later cards close up."""
    at = jnp.arange(CAPACITY)
    shifted = jnp.concatenate([cards[1:], jnp.full(1, NO_CARD, jnp.int32)])
    return jnp.where(at < index, cards, shifted)


def _pop(cards: jax.Array, n: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``list.pop()`` of a list of ``n`` cards: the last card, and the list without it."""
    top = jnp.maximum(n - 1, 0)
    return cards[top], cards.at[top].set(NO_CARD)


def _deal_one(
    cards: jax.Array, n: jax.Array, draws: Draws | None, when: jax.Array
) -> tuple[jax.Array, jax.Array, Draws | None]:
    """``deck.pop()`` of a shuffled deck. With training draws the shuffle is lazy
    (``speed_layer.shuffles_lazily``): the top card first trades places with a random card
    at or below it, and ``_replace_deck`` only gathers the cards."""
    if draws is None or not speed_layer.shuffles_lazily(draws):
        card, rest = _pop(cards, n)
        return card, rest, draws
    top = jnp.maximum(n - 1, 0)
    j, draws = draws.integers(0, top + 1, when=when)
    card, under = cards[j], cards[top]
    return card, cards.at[j].set(under).at[top].set(NO_CARD), draws


def legal(state: EnvState, player: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """rlcard's ``get_legal_actions`` for ``player``: (mask[61], each id's place in rlcard's
    order (smaller first; ``_FAR`` when illegal), how many are legal). rlcard lists the hand's
    playable cards in hand order, the four wild colours where the first wild card is, and the
    wild-draw-4 colours (where the first one is) only when nothing else is playable, else
    ``draw``; duplicates keep their first place."""
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
    ids = jnp.arange(NUM_ACTIONS)
    first_wild = jnp.min(jnp.where(is_wild, pos, _FAR // 8))
    first_wd4 = jnp.min(jnp.where(is_wd4, pos, _FAR // 8))
    kind, colors = trait(ids), color(ids)
    keys = jnp.where(
        kind == WILD, jnp.where(first_wild < CAPACITY, 4 * first_wild + colors, _FAR), keys
    )
    some = jnp.any(keys < _FAR)
    wd4 = jnp.where(~some & (first_wd4 < CAPACITY), 4 * first_wd4 + colors, _FAR)
    keys = jnp.where(kind == WILD_DRAW_4, wd4, keys)
    keys = jnp.where(ids == DRAW, jnp.where(jnp.any(keys < _FAR), _FAR, 0), keys)
    mask = keys < _FAR
    return mask, keys, jnp.sum(mask).astype(jnp.int32)


def nth_legal(hand: jax.Array, keys: jax.Array, index: jax.Array) -> jax.Array:
    """The id at place ``index`` of rlcard's order (``keys`` from :func:`legal` for ``hand``),
    walking the hand instead of sorting the ids: a card is listed at its hand position when
    its key is that position's (its id's first playable copy), four wild colours at the first
    wild (or wild draw 4); ``draw`` alone when nothing is."""
    pos = jnp.arange(CAPACITY)
    card = jnp.maximum(hand, 0)
    wild = (hand >= 0) & (trait(card) >= WILD)
    first = keys[15 * jnp.where(wild, 0, color(card)) + jnp.where(wild, trait(card), card % 15)]
    listed = (hand >= 0) & (first // 4 == pos) & (first < _FAR)
    entries = jnp.where(listed, jnp.where(wild, 4, 1), 0)
    upto = jnp.cumsum(entries)  # entries listed up to and including each position
    at = jnp.minimum(jnp.sum(upto <= index), CAPACITY - 1)  # the position holding place index
    before = upto[at] - entries[at]
    picked = jnp.where(wild[at], 15 * (index - before) + trait(card[at]), hand[at])
    return jnp.where(keys[DRAW] < _FAR, DRAW, picked).astype(jnp.int32)


def _replace_deck(state: EnvState, when: jax.Array, draws: Draws) -> tuple[EnvState, Draws]:
    """rlcard's ``replace_deck``: the played cards onto the deck, then ``shuffle`` the deck
    (Fisher-Yates from the end, as the tape's recorder draws it)."""
    at = jnp.arange(CAPACITY)
    nd, npl = state.n_deck, state.n_played
    joined = jnp.where(at < nd, state.deck, state.played[jnp.clip(at - nd, 0, CAPACITY - 1)])
    joined = jnp.where(at < nd + npl, joined, NO_CARD)
    deck = jnp.where(when, joined, state.deck)
    n = jnp.where(when, nd + npl, nd)
    played = jnp.where(when, jnp.full(CAPACITY, NO_CARD, jnp.int32), state.played)
    emptied = dict(deck=deck, n_deck=n, played=played, n_played=jnp.where(when, 0, npl))
    if speed_layer.shuffles_lazily(draws):  # shuffled card by card as it is dealt
        return state._replace(**emptied), draws

    def cond(carry: tuple[jax.Array, jax.Array, Draws]) -> jax.Array:
        k, _, _ = carry
        return when & (k < n - 1)

    def body(carry: tuple[jax.Array, jax.Array, Draws]) -> tuple[jax.Array, jax.Array, Draws]:
        k, deck, draws = carry
        i = n - 1 - k
        j, draws = draws.integers(0, i + 1)
        di, dj = deck[i], deck[j]
        return k + 1, deck.at[i].set(dj).at[j].set(di), draws

    _, deck, draws = jax.lax.while_loop(cond, body, (jnp.int32(0), deck, draws))
    return state._replace(**{**emptied, "deck": deck}), draws


def _deal(
    state: EnvState, player: jax.Array, n: int, when: jax.Array, draws: Draws | None
) -> tuple[EnvState, Draws | None]:
    """``deal_cards``: ``n`` cards from the end of the deck onto the end of the hand."""
    hands, n_hands = state.hands, state.n_hands
    deck, n_deck = state.deck, state.n_deck
    for _ in range(n):
        card, rest, draws = _deal_one(deck, n_deck, draws, when)
        deck = jnp.where(when, rest, deck)
        n_deck = jnp.where(when, jnp.maximum(n_deck - 1, 0), n_deck)
        hand, held = _append(hands[player], n_hands[player], card, when)
        hands, n_hands = hands.at[player].set(hand), n_hands.at[player].set(held)
    return state._replace(deck=deck, n_deck=n_deck, hands=hands, n_hands=n_hands), draws


def _action_card(
    state: EnvState, player: jax.Array, card: jax.Array, chosen: jax.Array, when: jax.Array,
    draws: Draws,
) -> tuple[EnvState, Draws]:  # fmt: skip
    """rlcard's ``_preform_non_number_action``: skip, reverse, draw-2, wild, wild-draw-4."""
    t = trait(card)
    other = 1 - player
    direction = jnp.where(t == REVERSE, -state.direction, state.direction)
    draw_2, draw_4 = when & (t == DRAW_2), when & (t == WILD_DRAW_4)
    short = (draw_2 & (state.n_deck < 2)) | (draw_4 & (state.n_deck < 4))
    new, draws = _replace_deck(state, short, draws)
    new, draws = _deal(new, other, 2, draw_2, draws)
    new, draws = _deal(new, other, 4, draw_4, draws)
    again = (t == SKIP) | (t == DRAW_2) | (t == WILD_DRAW_4)
    new = new._replace(
        direction=direction,
        current=jnp.where(again, player, other),
        target=card,
        target_color=chosen,
    )
    return jax.tree_util.tree_map(lambda a, b: jnp.where(when, a, b), new, state), draws


def proceed(
    state: EnvState, player: jax.Array, action: jax.Array, draws: Draws
) -> tuple[EnvState, Draws]:
    """One legal action of ``player`` (rlcard's ``proceed_round``).

    A card: the first card in hand with this id (a wild: with this trait) leaves the hand for
    the played pile. ``draw`` (``_perform_draw_action``): the deck is replaced if empty and its
    top card drawn; a wild is played at once in a random colour (no action of its own), a card
    of the colour to follow is played (its action done), any other goes to the hand. A card
    played becomes the target; an action card's effect follows (``_action_card``)."""
    is_draw = action == DRAW
    # drawing
    drew, draws = _replace_deck(state, is_draw & (state.n_deck == 0), draws)
    drawn, deck, draws = _deal_one(drew.deck, drew.n_deck, draws, is_draw)
    wild_drawn = trait(drawn) >= WILD
    picked, draws = draws.choice(4, when=is_draw & wild_drawn)
    same = ~wild_drawn & (color(drawn) == state.target_color)
    goes_down = wild_drawn | same
    played, n_played = _append(drew.played, drew.n_played, drawn, goes_down)
    hand, n_hand = _append(drew.hands[player], drew.n_hands[player], drawn, ~goes_down)
    after_draw = drew._replace(
        deck=deck,
        n_deck=jnp.where(is_draw, jnp.maximum(drew.n_deck - 1, 0), drew.n_deck),
        played=played,
        n_played=n_played,
        hands=drew.hands.at[player].set(hand),
        n_hands=drew.n_hands.at[player].set(n_hand),
    )
    # playing a card from the hand
    hand = state.hands[player]
    wild_played = trait(action) >= WILD
    hit = (hand >= 0) & jnp.where(wild_played, trait(hand) == trait(action), hand == action)
    index = jnp.argmax(hit)
    held = hand[index]
    hand = _remove(hand, index)
    n_hand = state.n_hands[player] - hit[index].astype(jnp.int32)
    played, n_played = _append(state.played, state.n_played, held, jnp.bool_(True))
    after_play = state._replace(
        hands=state.hands.at[player].set(hand),
        n_hands=state.n_hands.at[player].set(n_hand),
        played=played,
        n_played=n_played,
        winner=jnp.where(n_hand == 0, player, state.winner),
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
    acted, draws = _action_card(base, player, card, chosen, acts, draws)
    plain = base._replace(
        current=1 - player,
        target=jnp.where(down, card, base.target),
        target_color=jnp.where(down, chosen, base.target_color),
    )
    out = jax.tree_util.tree_map(lambda a, b: jnp.where(acts, a, b), acted, plain)
    return out, draws


def is_over(state: EnvState) -> jax.Array:
    return state.winner >= 0


def _turns(
    state: EnvState, action: jax.Array, agent_moves: jax.Array, draws: Draws
) -> tuple[EnvState, Draws]:
    """The agent's (legal) ``action`` if ``agent_moves``, then rlcard's RandomAgent
    (``np.random.choice`` over its legal ids, in rlcard's order) while it is player 1's turn
    and nobody has won: one loop, so that ``proceed`` is traced once."""

    def cond(carry: tuple[EnvState, Draws, jax.Array]) -> jax.Array:
        s, _, first = carry
        return first | ((s.current == 1) & ~is_over(s))

    def body(carry: tuple[EnvState, Draws, jax.Array]) -> tuple[EnvState, Draws, jax.Array]:
        s, d, first = carry
        _, keys, n = legal(s, jnp.int32(1))
        index, d = d.choice(n, when=~first)
        player = jnp.where(first, 0, 1).astype(jnp.int32)
        s, d = proceed(s, player, jnp.where(first, action, nth_legal(s.hands[1], keys, index)), d)
        return s, d, jnp.bool_(False)

    state, draws, _ = jax.lax.while_loop(cond, body, (state, draws, jnp.asarray(agent_moves)))
    return state, draws


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


def step_with_draws(
    state: EnvState, action: jax.Array, draws: Draws
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array, Draws]:
    mask, keys, n = legal(state, jnp.int32(0))
    action = jnp.asarray(action, jnp.int32)
    illegal = ~mask[jnp.clip(action, 0, NUM_ACTIONS - 1)]
    # the adapter plays an illegal id as np.random.choice(number of legal ids)
    index, draws = draws.choice(n, when=illegal)
    action = jnp.where(illegal, nth_legal(state.hands[0], keys, index), action)
    state, draws = _turns(state, action, jnp.bool_(True), draws)
    over = is_over(state)
    reward = jnp.where(over, jnp.where(state.winner == 0, 1.0, -1.0), 0.0)
    return state, observe(state), reward, over, jnp.bool_(False), draws


def _top_not_wild_draw_4(deck: jax.Array, left: int, key: jax.Array) -> jax.Array:
    """The speed layer's form of rlcard's "shuffle again while a wild draw 4 is on top" (a loop
    that, under ``vmap``, runs while any env in the batch redraws, a sort each time): a wild
    draw 4 on top trades places with a uniformly random other card that is not one. Uniform
    over the orders with no wild draw 4 on top, as the loop is: such an order is reached from
    itself, or from it with its top and one of its four wild draw 4s swapped (each with
    probability 1/(cards that are not wild draw 4s))."""
    pos = jnp.arange(CAPACITY)
    other = (pos < left - 1) & (trait(deck) != WILD_DRAW_4)
    r, _ = speed_layer.training_draws(key).integers(0, jnp.sum(other))
    q = jnp.argmax(other & (jnp.cumsum(other) == r + 1))
    swap = trait(deck[left - 1]) == WILD_DRAW_4
    top, card = deck[left - 1], deck[q]
    return jnp.where(swap, deck.at[q].set(top).at[left - 1].set(card), deck)


def _new_game(key: jax.Array) -> EnvState:
    """A shuffled deck, seven cards each (dealt from the end: the agent first), the top card
    flipped (a wild draw 4 goes back and the deck is shuffled again; a wild gets a random
    colour) and performed, then the opponent's turns if it starts."""
    key, deal, flip, pick, first = jax.random.split(key, 5)
    deck = _deck_ids()[speed_layer.permutation(deal, CAPACITY)]
    hands = jnp.full((2, CAPACITY), NO_CARD, jnp.int32)
    hands = hands.at[0, :HAND_SIZE].set(deck[::-1][:HAND_SIZE])
    hands = hands.at[1, :HAND_SIZE].set(deck[::-1][HAND_SIZE : 2 * HAND_SIZE])
    left = CAPACITY - 2 * HAND_SIZE
    deck = jnp.full(CAPACITY, NO_CARD, jnp.int32).at[:left].set(deck[:left])

    def redo(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        d, k = carry
        k, sub = jax.random.split(k)
        order = speed_layer.permutation(sub, left)
        return d.at[:left].set(d[:left][order]), k

    if speed_layer.enabled():
        deck = _top_not_wild_draw_4(deck, left, flip)
    else:
        deck, _ = jax.lax.while_loop(
            lambda c: trait(c[0][left - 1]) == WILD_DRAW_4, redo, (deck, flip)
        )
    top, deck = _pop(deck, jnp.int32(left))
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
        n_deck=jnp.int32(left - 1),
        n_played=jnp.int32(1),
        n_hands=jnp.full(2, HAND_SIZE, jnp.int32),
    )
    state, _ = _deal(state, jnp.int32(0), 2, trait(top) == DRAW_2, None)
    state, _ = _turns(state, jnp.int32(0), jnp.bool_(False), speed_layer.training_draws(first))
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
        n_deck=jnp.int32(0),
        n_played=jnp.int32(0),
        n_hands=jnp.zeros(2, jnp.int32),
    )
    return jax.lax.while_loop(is_over, lambda s: _new_game(s.key), start)


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Training: every draw from the key in the state."""
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated, _ = step_with_draws(
        state, action, speed_layer.training_draws(sub, TRAIN_LOG)
    )
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
    return EnvState(
        **f,
        current=jnp.int32(0),
        winner=jnp.int32(-1),
        key=key,
        n_deck=count(f["deck"]),
        n_played=count(f["played"]),
        n_hands=count(f["hands"]),
    )
