"""Duel: a Python reference drafted from RULES.md (envforge rules draft workspace).

Every rule implemented below cites its RULES.md line(s). Where the text leaves something
open, the decision is recorded in QUESTIONS.md and marked "Q<n>" in a comment here.
"""

import numpy as np

# L46: cards as (name, cost, power, health); health None marks a spell
CARDS = {
    1: ("Squire", 1, 1, 1),  # L47
    2: ("Archer", 2, 2, 1),  # L48
    3: ("Shieldbearer", 2, 1, 3),  # L49
    4: ("Leech", 2, 1, 2),  # L50
    5: ("Scout", 1, 1, 1),  # L51
    6: ("Knight", 3, 3, 3),  # L52
    7: ("Firebrand", 3, 2, 2),  # L53
    8: ("Cleric", 2, 0, 3),  # L54
    9: ("Assassin", 3, 3, 1),  # L55
    10: ("Ogre", 4, 5, 4),  # L56
    11: ("Wall", 3, 0, 6),  # L57
    12: ("Vampire", 4, 3, 3),  # L58
    13: ("Giant", 5, 6, 6),  # L59
    14: ("Bolt", 2, None, None),  # L60
    15: ("Mend", 1, None, None),  # L61
    16: ("Gamble", 2, None, None),  # L62
    17: ("Rally", 2, None, None),  # L63
    18: ("Quake", 4, None, None),  # L64
    19: ("Sprinter", 1, 1, 1),  # L65
    20: ("Golem", 5, 4, 7),  # L66
}
SWIFT = {2, 9, 19}  # L48 L55 L65
GUARD = {3, 11, 20}  # L49 L57 L66
DRAIN = {4, 12}  # L50 L58

MAX_LIFE = 15  # L7
HAND_SIZE = 6  # L15 L24
BOARD_SIZE = 4  # L18
DECK_SIZE = 20  # L7
MAX_ENERGY = 5  # L12
STEP_CAP = 200  # L44


def _upto(values, pad):
    """A list attribute as envforge writes it: the values up to the first pad value."""
    out = []
    for v in values:
        if int(v) == pad:
            break
        out.append(int(v))
    return out


def _pad(values, size, pad=0):
    """Exactly size values: cut, or filled with pad (only the observation needs this)."""
    values = [int(v) for v in values][:size]
    return values + [pad] * (size - len(values))


class Duel:
    """You against a scripted opponent; sides are "my" and "opp" in the attributes.

    List attributes are variable-length (env.toml pads them: 0, or -1 for ready flags): a
    deck, hand or board holds exactly its cards, and the health and ready lists hold one
    entry per creature on the board. Lists written padded are read up to their first pad.
    """

    def __init__(self):
        self.np_random = np.random.default_rng()
        self.my_life = MAX_LIFE
        self.opp_life = MAX_LIFE
        self.energy = 0
        self.turn = 1
        self.steps = 0
        self.my_deck = []
        self.opp_deck = []
        self.my_hand = []
        self.opp_hand = []
        self.my_board = []
        self.my_health = []
        self.my_ready = []
        self.opp_board = []
        self.opp_health = []
        self.opp_ready = []

    # ------------------------------------------------------------------ reset / step

    def reset(self, seed=None):
        # L74
        self.np_random = np.random.default_rng(seed)
        # L8 L75: your deck is shuffled first, then the opponent's; first card is the top
        my_deck = self.np_random.permutation(np.arange(1, DECK_SIZE + 1))
        opp_deck = self.np_random.permutation(np.arange(1, DECK_SIZE + 1))
        # L7
        self.my_deck = [int(c) for c in my_deck]
        self.opp_deck = [int(c) for c in opp_deck]
        self.my_life = MAX_LIFE
        self.opp_life = MAX_LIFE
        self.my_hand = []
        self.opp_hand = []
        self.my_board = []
        self.my_health = []
        self.my_ready = []
        self.opp_board = []
        self.opp_health = []
        self.opp_ready = []
        self.energy = 0
        self.steps = 0
        # L8: each side draws 4 cards, you first
        for _ in range(4):
            self._draw("my")
        for _ in range(4):
            self._draw("opp")
        # L9
        self.turn = 1
        # L9 L12-13: your first turn starts now (Q1: its draw happens in reset)
        self._start_my_turn()
        return self._get_obs(), {}

    def step(self, action):
        action = int(action)
        self.steps += 1
        try:
            # L15
            if 0 <= action <= 5:
                self._play_mine(action)
            # L16 (Q6: attacking with nothing ready is legal and does nothing)
            elif action == 6:
                self._attack("my")
            # L17 L35
            elif action == 7:
                self._opponent_turn()
                # L39 L82: the counter has no upper limit
                self.turn += 1
                self._start_my_turn()
        except _GameOver:
            pass
        reward, terminated = self._outcome()
        # L44: cut off after 200 steps (Q8: not when the step already ended the episode)
        truncated = (not terminated) and self.steps >= STEP_CAP
        return self._get_obs(), reward, terminated, truncated, {}

    # ------------------------------------------------------------------ observation

    def _get_obs(self):
        # L69-71 (Q7: a life of 0 or less is observed as 0)
        obs = [
            max(int(self.my_life), 0),
            max(int(self.opp_life), 0),
            int(self.energy),
            int(self.turn),  # L82: observed as it is, past 100 too
            len(self._cards(self.my_deck)),
            len(self._cards(self.opp_deck)),
        ]
        # L70: 6 hand positions, 0 where empty
        obs += _pad(self._cards(self.my_hand), HAND_SIZE)
        # L71: 4 positions of each board (cards, healths, ready flags), 0 where empty
        for side in ("my", "opp"):
            board = self._board(side)
            for k in range(3):
                obs += _pad([b[k] for b in board], BOARD_SIZE)
        return np.asarray(obs, dtype=np.float32)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _cards(lst):
        return _upto(lst, 0)

    def _get(self, side, what):
        return getattr(self, f"{side}_{what}")

    def _set(self, side, what, value):
        setattr(self, f"{side}_{what}", [int(v) for v in value])

    @staticmethod
    def _other(side):
        return "opp" if side == "my" else "my"

    def _board(self, side):
        """The side's creatures as [card, health, ready] lists, oldest first."""
        cards = self._cards(self._get(side, "board"))
        health = _pad(_upto(self._get(side, "health"), 0), len(cards))
        ready = _pad(_upto(self._get(side, "ready"), -1), len(cards))
        return [[c, health[i], ready[i]] for i, c in enumerate(cards)]

    def _store_board(self, side, board):
        self._set(side, "board", [b[0] for b in board])
        self._set(side, "health", [b[1] for b in board])
        self._set(side, "ready", [b[2] for b in board])

    def _lose_life(self, side, amount):
        setattr(self, f"{side}_life", self._get(side, "life") - amount)
        # L42: the episode ends at once (Q2: nothing more of the step happens)
        if self._get(side, "life") <= 0:
            raise _GameOver()

    def _gain_life(self, side, amount):
        # L32 (Q3: every life gain is capped at 15, not only Drain's)
        setattr(self, f"{side}_life", min(MAX_LIFE, self._get(side, "life") + amount))

    def _outcome(self):
        # L42: +1 if the opponent's life reached 0 first, -1 if yours did
        if self.opp_life <= 0:
            return 1.0, True
        if self.my_life <= 0:
            return -1.0, True
        # L43
        return 0.0, False

    # ------------------------------------------------------------------ drawing

    def _draw(self, side):
        deck = self._cards(self._get(side, "deck"))
        # L25
        if not deck:
            self._lose_life(side, 1)
            return
        # L23
        card = deck.pop(0)
        self._set(side, "deck", deck)
        hand = self._cards(self._get(side, "hand"))
        # L24 (Q9: discard piles are not in the state: no rule reads them)
        if len(hand) >= HAND_SIZE:
            return
        # L23
        hand.append(card)
        self._set(side, "hand", hand)

    # ------------------------------------------------------------------ turns

    def _start_turn(self, side):
        # L12 L36: draw one card, then energy is the turn counter, never more than 5
        self._draw(side)
        energy = min(self.turn, MAX_ENERGY)
        # L13 L36: creatures become ready
        board = self._board(side)
        for b in board:
            b[2] = 1
        self._store_board(side, board)
        return energy

    def _start_my_turn(self):
        # L12-13
        self.energy = self._start_turn("my")

    def _opponent_turn(self):
        # L35-36 (Q10: the opponent's energy lives only inside this step)
        energy = self._start_turn("opp")
        # L37: always the first card in hand order it can legally play, until none
        while True:
            hand = self._cards(self.opp_hand)
            legal = [p for p, c in enumerate(hand) if self._legal(c, energy, "opp")]
            if not legal:
                break
            energy -= CARDS[hand[legal[0]]][1]
            self._play("opp", legal[0])
        # L38
        self._attack("opp")

    # ------------------------------------------------------------------ playing cards

    def _legal(self, card, energy, side):
        # L18: a card you cannot pay for, or a creature when the board holds 4, is illegal
        if CARDS[card][1] > energy:
            return False
        is_creature = CARDS[card][3] is not None
        return not (is_creature and len(self._board(side)) >= BOARD_SIZE)

    def _play_mine(self, pos):
        hand = self._cards(self.my_hand)
        # L18: an empty position is an illegal play
        if pos >= len(hand) or not self._legal(hand[pos], self.energy, "my"):
            # L19
            self._lose_life("my", 1)
            return
        # L18: playing a card costs its energy
        self.energy -= CARDS[hand[pos]][1]
        self._play("my", pos)

    def _play(self, side, pos):
        """Play a legal, paid-for card from hand position pos."""
        hand = self._cards(self._get(side, "hand"))
        card = hand.pop(pos)
        self._set(side, "hand", hand)
        other = self._other(side)
        health = CARDS[card][3]
        if health is not None:
            # L20: goes to the end of the board, not ready unless it has Swift
            board = self._board(side)
            board.append([card, health, 1 if card in SWIFT else 0])
            self._store_board(side, board)
            # L51
            if card == 5:
                self._draw(side)
            # L53
            elif card == 7:
                self._damage_all(other, 1)
            # L54
            elif card == 8:
                self._gain_life(side, 3)
            return
        # L20: a played spell takes effect and goes to the discard pile
        # L60
        if card == 14:
            self._lose_life(other, 3)
        # L61
        elif card == 15:
            self._gain_life(side, 4)
        # L62 L76: one random() call when it takes effect; heads is below 0.5
        elif card == 16:
            if self.np_random.random() < 0.5:
                self._lose_life(other, 4)
            else:
                self._draw(side)
                self._draw(side)
        # L63
        elif card == 17:
            board = self._board(side)
            for b in board:
                b[2] = 1
            self._store_board(side, board)
        # L64
        elif card == 18:
            self._damage_all(side, 2)
            self._damage_all(other, 2)

    def _damage_all(self, side, amount):
        board = self._board(side)
        for b in board:
            b[1] -= amount
        # L30: dies at 0 or less and the board closes up behind it
        board = [b for b in board if b[1] > 0]
        self._store_board(side, board)

    # ------------------------------------------------------------------ attacking

    def _attack(self, side):
        other = self._other(side)
        # L16 L38: every ready creature, in board order; each becomes not ready
        i = 0
        while i < len(self._board(side)):
            board = self._board(side)
            if not board[i][2]:
                i += 1
                continue
            board[i][2] = 0
            self._store_board(side, board)
            card = board[i][0]
            power = CARDS[card][2]
            foes = self._board(other)
            # L28: the first creature with Guard on the opposing board, else life
            target = next((j for j, f in enumerate(foes) if f[0] in GUARD), None)
            if target is None:
                # L32 (Q4: Drain's gain comes with the damage, before the end check)
                if card in DRAIN:
                    self._gain_life(side, power)
                # L31
                self._lose_life(other, power)
                i += 1
                continue
            # L29: each deals damage equal to its power to the other at the same time
            foe = foes[target]
            foe[1] -= power
            board[i][1] -= CARDS[foe[0]][2]
            # L32 (Q5: the damage dealt is the full power, even past the health left)
            if card in DRAIN:
                self._gain_life(side, power)
            if foe[0] in DRAIN:
                self._gain_life(other, CARDS[foe[0]][2])
            # L30: dead creatures leave; the board closes up behind them
            died = board[i][1] <= 0
            self._store_board(side, [b for b in board if b[1] > 0])
            self._store_board(other, [f for f in foes if f[1] > 0])
            if not died:
                i += 1


class _GameOver(Exception):
    """Raised when a side's life reaches 0 or less: the episode ends at once (L42)."""
