"""UNO from rlcard 1.2.0, played by one agent against rlcard's own random agent.

The game, its rules, the deck and the opponent are rlcard's, unedited: ``rlcard.make("uno")``
and ``rlcard.agents.RandomAgent``. This file is the single-agent adapter envforge verifies: the
agent is player 0; after each of its actions the random agent plays player 1's turns until it
is the agent's turn again or the game is over (a skip, draw-2 or wild-draw-4 gives the player
who played it another turn). A reset deals again while the game ends before the agent's first
action. The observation is rlcard's 4x4x15 encoding for player 0, flattened (240 numbers),
followed by the agent's legal-action mask over rlcard's 61 action ids (301 in all); the reward
is player 0's payoff (+1 win, -1 loss) when the game ends, else 0.

Randomness: rlcard's game, dealer and round share one ``RandomState`` (``game.np_random``).
Here they hold a forwarder to this object's ``np_random`` instead, so that the verifier's RNG
tape, which stands in for the generators an env object holds as attributes, sees the
reshuffles and wild colours drawn inside a step (the forwarder changes where the draws come
from, not what is drawn). The random agent's ``np.random.choice`` is module-level and
recorded as such.

Cards are numbered like rlcard's action ids: ``card = 15 * colour + trait`` (colours r g b y,
traits 0-9, skip, reverse, draw_2, wild, wild_draw_4). A wild card keeps the colour it was
created with in its id (rlcard's ``card.str`` never changes, and the observation encodes the
target through it); the colour chosen when it is played is ``target_color``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rlcard
from rlcard.agents import RandomAgent
from rlcard.games.uno.card import UnoCard
from rlcard.games.uno.utils import ACTION_SPACE
from rlcard.utils import seeding

COLORS = UnoCard.info["color"]
TRAITS = UnoCard.info["trait"]
NO_CARD = -1
CAPACITY = 108
"""Every list (deck, played cards, each hand) can in principle hold the whole deck."""
NUM_ACTIONS = 61
COPIES = np.array(
    [1 if t in (0, 13, 14) else 2 for _ in COLORS for t in range(len(TRAITS))], np.int64
)
"""How many of each card id rlcard's deck holds (``utils.init_deck``)."""


def card_id(card: UnoCard) -> int:
    color, trait = card.str.split("-", 1)  # card.str: the colour it was created with
    return 15 * COLORS.index(color) + TRAITS.index(trait)


def card_of(card: int) -> UnoCard:
    color, trait = COLORS[card // 15], TRAITS[card % 15]
    kind = "number" if card % 15 < 10 else "action" if card % 15 < 13 else "wild"
    return UnoCard(kind, color, trait)


class _Forward:
    """Stands where rlcard keeps its ``RandomState``: every call goes to ``owner.np_random``,
    looked up at call time (the tape replaces that attribute for the length of a step)."""

    def __init__(self, owner: UnoVsRandom) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.np_random, name)


class UnoVsRandom:
    """Player 0 of rlcard's UNO against rlcard's RandomAgent."""

    def __init__(self) -> None:
        self.env = rlcard.make("uno")
        self.opponent = RandomAgent(num_actions=self.env.num_actions)
        self.np_random, _ = seeding.np_random(0)
        self.env.game.np_random = _Forward(self)
        self.env.reset()

    @property
    def game(self) -> Any:
        return self.env.game

    # ---- gymnasium's API -------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self.np_random, _ = seeding.np_random(int(seed))  # as rlcard's env.seed makes it
        while True:  # a game over before the agent acts has no decision in it
            _, player = self.env.reset()
            self._opponent_turns(player)
            if not self.env.is_over():
                return self._get_obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        legal = list(self.env._get_legal_actions())
        if int(action) not in legal:
            # what rlcard's UnoEnv._decode_action means to do, which in rlcard 1.2.0 raises
            # instead (it passes np.random.choice an OrderedDict): a uniformly random legal id
            action = legal[np.random.choice(len(legal))]
        _, player = self.env.step(int(action))
        self._opponent_turns(player)
        over = bool(self.env.is_over())
        reward = float(self.env.get_payoffs()[0]) if over else 0.0
        return self._get_obs(), reward, over, False, {}

    def _opponent_turns(self, player: int) -> None:
        while player == 1 and not self.env.is_over():
            state = self.env._extract_state(self.game.get_state(1))
            _, player = self.env.step(self.opponent.step(state))

    def _get_obs(self) -> np.ndarray:
        planes = self.env._extract_state(self.game.get_state(0))["obs"]
        mask = np.zeros(NUM_ACTIONS, np.float32)
        for a in self.game.round.get_legal_actions(self.game.players, 0):
            mask[ACTION_SPACE[a]] = 1.0
        return np.concatenate([np.asarray(planes, np.float32).reshape(-1), mask])

    def _agent_to_act(self) -> None:
        """A written state is one the agent acts from: its turn, the game not over."""
        rnd = self.game.round
        rnd.current_player = 0
        rnd.is_over = False
        rnd.winner = None
        self.game.payoffs = [0, 0]

    # ---- the canonical state (env.toml's attrs) -------------------------------------------
    @property
    def deck(self) -> list[int]:
        """The draw pile, bottom first (rlcard draws from the end of the list)."""
        return [card_id(c) for c in self.game.dealer.deck]

    @deck.setter
    def deck(self, cards: list[int]) -> None:
        self.game.dealer.deck = [card_of(int(c)) for c in cards]
        self._agent_to_act()

    @property
    def played(self) -> list[int]:
        """``round.played_cards``, oldest first: shuffled back into the deck when it runs out."""
        return [card_id(c) for c in self.game.round.played_cards]

    @played.setter
    def played(self, cards: list[int]) -> None:
        self.game.round.played_cards = [card_of(int(c)) for c in cards]
        self._agent_to_act()

    @property
    def hands(self) -> np.ndarray:
        """[2, CAPACITY]: each player's hand in order, then NO_CARD."""
        out = np.full((2, CAPACITY), NO_CARD, np.int32)
        for i, p in enumerate(self.game.players):
            out[i, : len(p.hand)] = [card_id(c) for c in p.hand]
        return out

    @hands.setter
    def hands(self, cards: Any) -> None:
        for p, row in zip(self.game.players, np.asarray(cards).reshape(2, -1), strict=True):
            end = np.flatnonzero(row == NO_CARD)
            p.hand = [card_of(int(c)) for c in row[: int(end[0]) if len(end) else len(row)]]
        self._agent_to_act()

    @property
    def target(self) -> int:
        return card_id(self.game.round.target)

    @target.setter
    def target(self, card: int) -> None:
        old = self.game.round.target
        new = card_of(int(card))
        if new.type == "wild" and old is not None:
            new.color = old.color  # the chosen colour is target_color's
        self.game.round.target = new
        self._agent_to_act()

    @property
    def target_color(self) -> int:
        """The colour to follow: the target's own, or the one chosen for a wild target."""
        return COLORS.index(self.game.round.target.color)

    @target_color.setter
    def target_color(self, color: int) -> None:
        self.game.round.target.color = COLORS[int(color)]
        self._agent_to_act()

    @property
    def direction(self) -> int:
        return int(self.game.round.direction)

    @direction.setter
    def direction(self, d: int) -> None:
        self.game.round.direction = int(d)
        self._agent_to_act()


def _keep(items: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """``items`` up to the first NO_CARD, less those already ``seen`` as often as the deck
    holds them (counted into ``seen``), closed up."""
    out = np.full_like(items, NO_CARD)
    n = 0
    for c in items:
        if c < 0:
            break
        if seen[c] < COPIES[c]:
            seen[c] += 1
            out[n] = c
            n += 1
    return out


def constrain(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Drawn states made into ones rlcard can step from (``[verify] constrain``): each hand
    ends at its first NO_CARD; no card is held more often, over the deck, the played cards and
    both hands together, than rlcard's deck has copies of it (a third copy of a card in a hand
    overflows rlcard's observation planes, and a real game never has one); a drawn direction
    of 0 is 1. The duplicates are dropped and the lists closed up."""
    deck = np.asarray(state["deck"]).copy()
    played = np.asarray(state["played"]).copy()
    hands = np.asarray(state["hands"]).copy()
    for b in range(deck.shape[0]):
        seen = np.zeros(len(COPIES), np.int64)
        deck[b] = _keep(deck[b], seen)
        played[b] = _keep(played[b], seen)
        for p in range(2):
            hands[b, p] = _keep(hands[b, p], seen)
    out = dict(state)
    out.update(deck=deck, played=played, hands=hands)
    out["direction"] = np.where(np.asarray(state["direction"]) == 0, 1, state["direction"])
    return out
