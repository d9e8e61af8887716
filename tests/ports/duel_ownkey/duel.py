"""Duel in JAX, drawing from its own ``jax.random`` key the way gymnax-style libraries do: not
through ``envforge.rng.jax_draws.Draws``, so no tape can be replayed to it (each Gamble's coin is
one ``jax.random.bernoulli`` from a key split off the step's, not the reference's
``random() < 0.5``; the decks are ``jax.random.permutation``s at reset). It can only be verified
in distribution mode (``env.toml`` beside it: ``[rng] step = "distribution"``). Written by hand
(PROVENANCE.md) from ``generated/duel/jax/duel.py``: the same rules, another
generator. Reference: references/duel/duel.py:Duel (names and structure follow it).

One environment at a time; the backend vmaps and jits. Lists (decks, hands, boards) are
fixed-length arrays holding their elements first and the spec's pad value after them (0, or
-1 for the ready flags). A side is "my" or "opp", as in the reference's attribute names, and
is always a Python string here (static), never a traced value.

The reference ends a step "at once" by raising _GameOver when a life reaches 0 or less; here a
`over` flag is carried through the step and every later change is gated by `~over`.

``step_with_draws`` is the verifier's entry point: it takes the key the driver seeds
(``draws.key``) and returns ``draws`` untouched (nothing is logged).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

I32 = jnp.int32

# L46: cards as (name, cost, power, health); health None marks a spell
CARDS = {
    1: ("Squire", 1, 1, 1),
    2: ("Archer", 2, 2, 1),
    3: ("Shieldbearer", 2, 1, 3),
    4: ("Leech", 2, 1, 2),
    5: ("Scout", 1, 1, 1),
    6: ("Knight", 3, 3, 3),
    7: ("Firebrand", 3, 2, 2),
    8: ("Cleric", 2, 0, 3),
    9: ("Assassin", 3, 3, 1),
    10: ("Ogre", 4, 5, 4),
    11: ("Wall", 3, 0, 6),
    12: ("Vampire", 4, 3, 3),
    13: ("Giant", 5, 6, 6),
    14: ("Bolt", 2, None, None),
    15: ("Mend", 1, None, None),
    16: ("Gamble", 2, None, None),
    17: ("Rally", 2, None, None),
    18: ("Quake", 4, None, None),
    19: ("Sprinter", 1, 1, 1),
    20: ("Golem", 5, 4, 7),
}
SWIFT = {2, 9, 19}
GUARD = {3, 11, 20}
DRAIN = {4, 12}

MAX_LIFE = 15
HAND_SIZE = 6
BOARD_SIZE = 4
DECK_SIZE = 20
MAX_ENERGY = 5
STEP_CAP = 200

# the card table as arrays indexed by card number (index 0: no card)
COST = np.zeros(21, np.int32)
POWER = np.zeros(21, np.int32)
HEALTH = np.zeros(21, np.int32)  # 0 for a spell
IS_CREATURE = np.zeros(21, bool)
for _c, (_name, _cost, _power, _health) in CARDS.items():
    COST[_c] = _cost
    POWER[_c] = _power or 0
    HEALTH[_c] = _health or 0
    IS_CREATURE[_c] = _health is not None
IS_SWIFT = np.isin(np.arange(21), list(SWIFT))
IS_GUARD = np.isin(np.arange(21), list(GUARD))
IS_DRAIN = np.isin(np.arange(21), list(DRAIN))
# as jnp constants, so that a traced card number can index them
COST, POWER, HEALTH = jnp.asarray(COST), jnp.asarray(POWER), jnp.asarray(HEALTH)
IS_CREATURE, IS_SWIFT = jnp.asarray(IS_CREATURE), jnp.asarray(IS_SWIFT)
IS_GUARD, IS_DRAIN = jnp.asarray(IS_GUARD), jnp.asarray(IS_DRAIN)

# the most cards the opponent can play in one turn: every card costs at least 1, energy <= 5
MAX_PLAYS = MAX_ENERGY + 1

LISTS = {"deck": 0, "hand": 0, "board": 0, "health": 0, "ready": -1}  # pad of each list


class EnvState(NamedTuple):
    my_life: jax.Array
    opp_life: jax.Array
    energy: jax.Array
    turn: jax.Array
    steps: jax.Array
    my_deck: jax.Array
    opp_deck: jax.Array
    my_hand: jax.Array
    opp_hand: jax.Array
    my_board: jax.Array
    my_health: jax.Array
    my_ready: jax.Array
    opp_board: jax.Array
    opp_health: jax.Array
    opp_ready: jax.Array
    key: jax.Array  # the port's own generator (not a canonical field)


FIELDS = EnvState._fields[:-1]


class Game(NamedTuple):
    """A step in progress: the state, whether the episode ended at once, the step's key."""

    st: EnvState
    over: jax.Array
    key: jax.Array


# ------------------------------------------------------------------ list helpers


def _count(values, pad):
    """The number of elements: the index of the first pad value (or the length)."""
    hit = jnp.concatenate([values == pad, jnp.ones((1,), bool)])
    return jnp.argmax(hit).astype(I32)


def _upto(values, pad):
    """values with every slot from the first pad value on set to pad."""
    idx = jnp.arange(values.shape[0])
    return jnp.where(idx < _count(values, pad), values, pad).astype(I32)


def _pop(values, pos, pad):
    """values without the element at pos (later elements move up one slot)."""
    n = values.shape[0]
    idx = jnp.arange(n)
    src = jnp.where(idx >= pos, idx + 1, idx)
    return jnp.where(src < n, values[jnp.clip(src, 0, n - 1)], pad).astype(I32)


def _append(values, count, value):
    return values.at[count].set(value, mode="drop").astype(I32)


def _compact(values, keep, pad):
    """The kept elements, in order, then pad (the board closes up behind the dead)."""
    n = values.shape[0]
    dst = jnp.where(keep, jnp.cumsum(keep) - 1, n)
    return jnp.full((n,), pad, I32).at[dst].set(values.astype(I32), mode="drop")


# ------------------------------------------------------------------ state helpers


def _get(g, side, what):
    return getattr(g.st, f"{side}_{what}")


def _set(g, side, what, value, cond):
    old = _get(g, side, what)
    new = jnp.where(cond, value, old).astype(I32)
    return g._replace(st=g.st._replace(**{f"{side}_{what}": new}))


def _set_field(g, name, value, cond):
    new = jnp.where(cond, value, getattr(g.st, name)).astype(I32)
    return g._replace(st=g.st._replace(**{name: new}))


def _other(side):
    return "opp" if side == "my" else "my"


def _board_count(g, side):
    return _count(_get(g, side, "board"), 0)


def _store_board(g, side, board, health, ready, cond):
    g = _set(g, side, "board", board, cond)
    g = _set(g, side, "health", health, cond)
    return _set(g, side, "ready", ready, cond)


def _lose_life(g, side, amount, cond):
    cond = cond & ~g.over
    life = _get(g, side, "life")
    g = _set(g, side, "life", life - amount, cond)
    # L42: the episode ends at once (nothing more of the step happens)
    return g._replace(over=g.over | (cond & (_get(g, side, "life") <= 0)))


def _gain_life(g, side, amount, cond):
    cond = cond & ~g.over
    life = _get(g, side, "life")
    return _set(g, side, "life", jnp.minimum(MAX_LIFE, life + amount), cond)


def _outcome(st):
    # L42: +1 if the opponent's life reached 0 first, -1 if yours did
    reward = jnp.where(st.opp_life <= 0, 1.0, jnp.where(st.my_life <= 0, -1.0, 0.0))
    terminated = (st.opp_life <= 0) | (st.my_life <= 0)
    return reward.astype(jnp.float32), terminated


# ------------------------------------------------------------------ drawing


def _draw(g, side, cond):
    cond = cond & ~g.over
    deck = _get(g, side, "deck")
    n = _count(deck, 0)
    # L25: an empty deck costs its drawer 1 life
    g = _lose_life(g, side, 1, cond & (n == 0))
    take = cond & (n > 0)
    card = deck[0]
    g = _set(g, side, "deck", _pop(deck, 0, 0), take)
    hand = _get(g, side, "hand")
    h = _count(hand, 0)
    # L24: a full hand discards the drawn card
    return _set(g, side, "hand", _append(hand, h, card), take & (h < HAND_SIZE))


# ------------------------------------------------------------------ turns


def _start_turn(g, side, cond):
    """Draw, then ready the side's creatures; returns the game and the turn's energy."""
    g = _draw(g, side, cond)
    cond = cond & ~g.over
    energy = jnp.minimum(g.st.turn, MAX_ENERGY).astype(I32)
    board = _get(g, side, "board")
    n = _count(board, 0)
    ready = jnp.where(jnp.arange(BOARD_SIZE) < n, 1, -1)
    return _set(g, side, "ready", ready, cond), energy


def _start_my_turn(g, cond):
    g, energy = _start_turn(g, "my", cond)
    return _set_field(g, "energy", energy, cond & ~g.over)


def _opponent_turn(g, cond):
    g, energy = _start_turn(g, "opp", cond)

    # L37: always the first card in hand order it can legally play, until none
    def play_one(_, carry):
        g, energy = carry
        hand = g.st.opp_hand
        n = _count(hand, 0)
        legal = _legal(g, hand, energy, "opp") & (jnp.arange(HAND_SIZE) < n)
        active = cond & ~g.over & jnp.any(legal)
        pos = jnp.argmax(legal).astype(I32)
        energy = jnp.where(active, energy - COST[hand[pos]], energy).astype(I32)
        g = _play(g, "opp", pos, active)
        return g, energy

    g, energy = jax.lax.fori_loop(0, MAX_PLAYS, play_one, (g, energy))
    # L38
    return _attack(g, "opp", cond)


# ------------------------------------------------------------------ playing cards


def _legal(g, card, energy, side):
    # L18: a card you cannot pay for, or a creature when the board holds 4, is illegal
    payable = COST[card] <= energy
    full = _board_count(g, side) >= BOARD_SIZE
    return payable & ~(IS_CREATURE[card] & full)


def _play_mine(g, pos, cond):
    hand = g.st.my_hand
    n = _count(hand, 0)
    card = hand[jnp.clip(pos, 0, HAND_SIZE - 1)]
    # L18: an empty position is an illegal play
    illegal = (pos >= n) | ~_legal(g, card, g.st.energy, "my")
    # L19
    g = _lose_life(g, "my", 1, cond & illegal)
    ok = cond & ~illegal
    g = _set_field(g, "energy", g.st.energy - COST[card], ok)
    return _play(g, "my", pos, ok)


def _play(g, side, pos, cond):
    """Play a legal, paid-for card from hand position pos."""
    cond = cond & ~g.over
    hand = _get(g, side, "hand")
    card = hand[jnp.clip(pos, 0, HAND_SIZE - 1)]
    g = _set(g, side, "hand", _pop(hand, pos, 0), cond)
    other = _other(side)
    creature = cond & IS_CREATURE[card]
    # L20: goes to the end of the board, not ready unless it has Swift
    n = _board_count(g, side)
    g = _store_board(
        g,
        side,
        _append(_get(g, side, "board"), n, card),
        _append(_get(g, side, "health"), n, HEALTH[card]),
        _append(_get(g, side, "ready"), n, jnp.where(IS_SWIFT[card], 1, 0)),
        creature,
    )
    g = _draw(g, side, creature & (card == 5))  # L51
    g = _damage_all(g, other, 1, creature & (card == 7))  # L53
    g = _gain_life(g, side, 3, creature & (card == 8))  # L54
    # L20: a played spell takes effect and goes to the discard pile
    spell = cond & ~IS_CREATURE[card]
    g = _lose_life(g, other, 3, spell & (card == 14))  # L60
    g = _gain_life(g, side, 4, spell & (card == 15))  # L61
    # L62: a fair coin (the port's own: one bernoulli from a key split off the step's)
    gamble = spell & (card == 16) & ~g.over
    key, coin = jax.random.split(g.key)
    g = g._replace(key=key)
    heads = jax.random.bernoulli(coin)
    g = _lose_life(g, other, 4, gamble & heads)
    g = _draw(g, side, gamble & ~heads)
    g = _draw(g, side, gamble & ~heads)
    # L63
    rally = spell & (card == 17)
    n = _board_count(g, side)
    g = _set(g, side, "ready", jnp.where(jnp.arange(BOARD_SIZE) < n, 1, -1), rally)
    # L64
    quake = spell & (card == 18)
    g = _damage_all(g, side, 2, quake)
    return _damage_all(g, other, 2, quake)


def _damage_all(g, side, amount, cond):
    cond = cond & ~g.over
    board = _get(g, side, "board")
    n = _count(board, 0)
    alive = jnp.arange(BOARD_SIZE) < n
    health = jnp.where(alive, _get(g, side, "health") - amount, 0)
    # L30: dies at 0 or less and the board closes up behind it
    return _close_up(g, side, health, cond)


def _close_up(g, side, health, cond):
    """The side's board with its new healths, the dead (health 0 or less) removed."""
    board = _get(g, side, "board")
    keep = (jnp.arange(BOARD_SIZE) < _count(board, 0)) & (health > 0)
    return _store_board(
        g,
        side,
        _compact(board, keep, 0),
        _compact(health, keep, 0),
        _compact(_get(g, side, "ready"), keep, -1),
        cond,
    )


# ------------------------------------------------------------------ attacking


def _attack(g, side, cond):
    other = _other(side)

    # L16 L38: every ready creature, in board order; each becomes not ready. Each pass
    # either moves on (i + 1) or removes the attacker, so BOARD_SIZE passes are enough.
    def one(_, carry):
        g, i = carry
        board = _get(g, side, "board")
        active = cond & ~g.over & (i < _count(board, 0))
        j = jnp.clip(i, 0, BOARD_SIZE - 1)
        ready = _get(g, side, "ready")
        skip = active & (ready[j] == 0)
        go = active & (ready[j] != 0)
        g = _set(g, side, "ready", ready.at[j].set(0), go)
        card = board[j]
        power = POWER[card]
        foes = _get(g, other, "board")
        guards = IS_GUARD[foes] & (jnp.arange(BOARD_SIZE) < _count(foes, 0))
        # L28: the first creature with Guard on the opposing board, else life
        has_target = jnp.any(guards)
        target = jnp.argmax(guards)
        at_life = go & ~has_target
        # L32: Drain's gain comes with the damage, before the end check
        g = _gain_life(g, side, power, at_life & IS_DRAIN[card])
        # L31
        g = _lose_life(g, other, power, at_life)
        # L29: each deals damage equal to its power to the other at the same time
        fight = go & has_target
        foe = foes[target]
        foe_health = _get(g, other, "health").at[target].add(-power)
        health = _get(g, side, "health").at[j].add(-POWER[foe])
        # L32: the damage dealt is the full power, even past the health left
        g = _gain_life(g, side, power, fight & IS_DRAIN[card])
        g = _gain_life(g, other, POWER[foe], fight & IS_DRAIN[foe])
        # L30: dead creatures leave; the board closes up behind them
        died = health[j] <= 0
        g = _close_up(g, side, health, fight)
        g = _close_up(g, other, foe_health, fight)
        i = jnp.where(skip | at_life | (fight & ~died), i + 1, i).astype(I32)
        return g, i

    g, _ = jax.lax.fori_loop(0, BOARD_SIZE, one, (g, jnp.zeros((), I32)))
    return g


# ------------------------------------------------------------------ the five functions


def observe(state: EnvState) -> jax.Array:
    # L69-71 (a life of 0 or less is observed as 0)
    head = jnp.stack(
        [
            jnp.maximum(state.my_life, 0),
            jnp.maximum(state.opp_life, 0),
            state.energy,
            state.turn,
            _count(state.my_deck, 0),
            _count(state.opp_deck, 0),
        ]
    )
    parts = [head, state.my_hand]
    for side in ("my", "opp"):
        board = getattr(state, f"{side}_board")
        alive = jnp.arange(BOARD_SIZE) < _count(board, 0)
        parts += [
            jnp.where(alive, board, 0),
            jnp.where(alive, getattr(state, f"{side}_health"), 0),
            jnp.where(alive, getattr(state, f"{side}_ready"), 0),
        ]
    return jnp.concatenate([p.astype(jnp.float32) for p in parts])


def _new_game(state, key):
    return Game(state, jnp.zeros((), bool), key)


def reset(seed: jax.Array) -> EnvState:
    key = jax.random.PRNGKey(seed.astype(jnp.uint32))
    key, k_my, k_opp = jax.random.split(key, 3)
    # L8 L75: your deck is shuffled first, then the opponent's; first card is the top
    cards = jnp.arange(1, DECK_SIZE + 1, dtype=I32)
    my_deck = jax.random.permutation(k_my, cards)
    opp_deck = jax.random.permutation(k_opp, cards)
    # L7: 15 life, an empty hand and an empty board each
    size = {
        "hand": HAND_SIZE,
        "board": BOARD_SIZE,
        "health": BOARD_SIZE,
        "ready": BOARD_SIZE,
    }
    empty = {
        f"{side}_{what}": jnp.full((n,), LISTS[what], I32)
        for side in ("my", "opp")
        for what, n in size.items()
    }
    life = I32(MAX_LIFE)
    state = EnvState(life, life, I32(0), I32(1), I32(0), my_deck, opp_deck, **empty, key=key)
    g = _new_game(state, key)
    yes = jnp.ones((), bool)
    # L8: each side draws 4 cards, you first
    for _ in range(4):
        g = _draw(g, "my", yes)
    for _ in range(4):
        g = _draw(g, "opp", yes)
    # L9 L12-13: your first turn starts now (its draw happens in reset)
    g = _start_my_turn(g, yes)
    return g.st


def _step(state: EnvState, action: jax.Array, key: jax.Array):
    action = jnp.asarray(action).astype(I32)
    g = _new_game(state._replace(steps=(state.steps + 1).astype(I32)), key)
    yes = jnp.ones((), bool)
    # L15
    g = _play_mine(g, action, (action >= 0) & (action <= 5))
    # L16
    g = _attack(g, "my", action == 6)
    # L17 L35
    end = action == 7
    g = _opponent_turn(g, end)
    # L39 L82: the counter has no upper limit
    g = _set_field(g, "turn", g.st.turn + 1, end & ~g.over)
    g = _start_my_turn(g, end & ~g.over & yes)
    st = g.st
    reward, terminated = _outcome(st)
    # L44: cut off after 200 steps (not when the step already ended the episode)
    truncated = ~terminated & (st.steps >= STEP_CAP)
    return st, observe(st), reward, terminated, truncated


def step_with_draws(state: EnvState, action: jax.Array, draws: Any):
    """The verifier's call: the port's own draws from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def step(state: EnvState, action: jax.Array):
    key, sub = jax.random.split(state.key)
    st, obs, reward, terminated, truncated = _step(state, action, sub)
    return st._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {name: getattr(state, name).astype(I32) for name in FIELDS}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    values = {name: fields[name].astype(I32) for name in FIELDS}
    for name in FIELDS:
        what = name.split("_", 1)[-1]
        if what in LISTS:
            values[name] = _upto(values[name], LISTS[what])
    return EnvState(**values, key=jax.random.PRNGKey(0))
