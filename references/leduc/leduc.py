"""Leduc Hold'em from rlcard 1.2.0, played by one agent against rlcard's own random agent.

The game, its rules, the deal and the opponent are rlcard's, unedited: ``rlcard.make
("leduc-holdem")`` and ``rlcard.agents.RandomAgent``. This file is the single-agent adapter
envforge verifies: the agent is player 0; after each of its actions the random agent plays
player 1's turns until it is the agent's turn again or the game is over. A reset deals again
(with the same generators) while the opponent folds before the agent's first action, since
such a game has no decision for the agent. The observation is
rlcard's 36-number encoding for player 0; the reward is player 0's payoff (in big blinds) when
the game ends, else 0.

The canonical state is read from and written into rlcard's objects through the properties
below (the declared mapping of ``env.toml``). Cards are numbered by their place in rlcard's
unshuffled deck, ``CARDS``: rank = card // 2 (J, Q, K), suit = card % 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rlcard
from rlcard.agents import RandomAgent
from rlcard.games.base import Card

CARDS = ("SJ", "HJ", "SQ", "HQ", "SK", "HK")
"""rlcard's Leduc deck before the shuffle (``LeducholdemDealer``), as suit + rank."""
NO_CARD = -1


def card_id(card: Card | None) -> int:
    return NO_CARD if card is None else CARDS.index(card.get_index())


def card_of(card: int) -> Card | None:
    return None if card < 0 else Card(CARDS[card][0], CARDS[card][1])


class LeducVsRandom:
    """Player 0 of rlcard's Leduc Hold'em against rlcard's RandomAgent."""

    def __init__(self) -> None:
        self.env = rlcard.make("leduc-holdem")
        self.opponent = RandomAgent(num_actions=self.env.num_actions)
        self.env.reset()

    @property
    def game(self) -> Any:
        return self.env.game

    # ---- gymnasium's API -------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self.env.seed(seed)  # rlcard's deal draws from the game's RandomState
        while True:  # a game the opponent folds before the agent acts has no decision in it
            _, player = self.env.reset()
            self._opponent_turns(player)
            if not self.env.is_over():
                return self._get_obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        _, player = self.env.step(int(action))  # rlcard maps an illegal action to check or fold
        self._opponent_turns(player)
        over = bool(self.env.is_over())
        reward = float(self.env.get_payoffs()[0]) if over else 0.0
        return self._get_obs(), reward, over, False, {}

    def _opponent_turns(self, player: int) -> None:
        while player == 1 and not self.env.is_over():
            state = self.env._extract_state(self.game.get_state(1))
            _, player = self.env.step(self.opponent.step(state))

    def _get_obs(self) -> np.ndarray:
        return np.asarray(self.env._extract_state(self.game.get_state(0))["obs"], np.float32)

    # ---- the canonical state (env.toml's attrs) -------------------------------------------
    @property
    def deck(self) -> list[int]:
        """The cards left to deal, bottom first (rlcard deals from the end of the list)."""
        return [card_id(c) for c in self.game.dealer.deck]

    @deck.setter
    def deck(self, cards: list[int]) -> None:
        self.game.dealer.deck = [card_of(int(c)) for c in cards]

    @property
    def hands(self) -> list[int]:
        return [card_id(p.hand) for p in self.game.players]

    @hands.setter
    def hands(self, cards: Any) -> None:
        for p, c in zip(self.game.players, cards, strict=True):
            p.hand = card_of(int(c))

    @property
    def public(self) -> int:
        return card_id(self.game.public_card)

    @public.setter
    def public(self, card: int) -> None:
        self.game.public_card = card_of(int(card))

    @property
    def banked(self) -> int:
        """Chips each player put in during finished betting rounds (equal: a fold ends the
        game). rlcard keeps ``in_chips`` per player = banked + this round's ``raised``."""
        return int(self.game.players[0].in_chips - self.game.round.raised[0])

    @banked.setter
    def banked(self, chips: int) -> None:
        for p, r in zip(self.game.players, self.game.round.raised, strict=True):
            p.in_chips = int(chips) + r
            p.status = "alive"  # at the agent's turn nobody has folded

    @property
    def raised(self) -> list[int]:
        return [int(r) for r in self.game.round.raised]

    @raised.setter
    def raised(self, chips: Any) -> None:
        banked = self.banked
        self.game.round.raised = [int(c) for c in chips]
        self.banked = banked

    @property
    def have_raised(self) -> int:
        return int(self.game.round.have_raised)

    @have_raised.setter
    def have_raised(self, n: int) -> None:
        self.game.round.have_raised = int(n)

    @property
    def not_raise_num(self) -> int:
        return int(self.game.round.not_raise_num)

    @not_raise_num.setter
    def not_raise_num(self, n: int) -> None:
        self.game.round.not_raise_num = int(n)

    @property
    def round_counter(self) -> int:
        return int(self.game.round_counter)

    @round_counter.setter
    def round_counter(self, n: int) -> None:
        """Also what follows from it in rlcard: the round's raise amount (2, then 4 from the
        second round) and whose turn it is (the agent's: a state is written for it to act)."""
        self.game.round_counter = int(n)
        self.game.round.raise_amount = self.game.raise_amount * (2 if n >= 1 else 1)
        self.game.game_pointer = self.game.round.game_pointer = 0
