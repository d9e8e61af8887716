"""Duel: a Python reference drafted from RULES.md (envforge's Python reference contract).

Every rule implemented below cites the RULES.md lines it comes from (`# L12`). Where the text
left something open, the decision taken is written in QUESTIONS.md and marked `Q<n>` here.
"""
import numpy as np

# L46-66: card number -> (name, cost, power, health, keywords); spells have power/health None
CARDS = {
    1: ("Squire", 1, 1, 1, ()),  # L47
    2: ("Archer", 2, 2, 1, ("swift",)),  # L48
    3: ("Shieldbearer", 2, 1, 3, ("guard",)),  # L49
    4: ("Leech", 2, 1, 2, ("drain",)),  # L50
    5: ("Scout", 1, 1, 1, ("draw1",)),  # L51
    6: ("Knight", 3, 3, 3, ()),  # L52
    7: ("Firebrand", 3, 2, 2, ("ping",)),  # L53
    8: ("Cleric", 2, 0, 3, ("heal3",)),  # L54
    9: ("Assassin", 3, 3, 1, ("swift",)),  # L55
    10: ("Ogre", 4, 5, 4, ()),  # L56
    11: ("Wall", 3, 0, 6, ("guard",)),  # L57
    12: ("Vampire", 4, 3, 3, ("drain",)),  # L58
    13: ("Giant", 5, 6, 6, ()),  # L59
    14: ("Bolt", 2, None, None, ("spell",)),  # L60
    15: ("Mend", 1, None, None, ("spell",)),  # L61
    16: ("Gamble", 2, None, None, ("spell",)),  # L62
    17: ("Rally", 2, None, None, ("spell",)),  # L63
    18: ("Quake", 4, None, None, ("spell",)),  # L64
    19: ("Sprinter", 1, 1, 1, ("swift",)),  # L65
    20: ("Golem", 5, 4, 7, ("guard",)),  # L66
}

# L7: 15 life; also the most life a side can have (L32; Q3)
MAX_LIFE = 15
DECK_SIZE = 20  # L7
HAND_SIZE = 6  # L15, L24, L70
BOARD_SIZE = 4  # L18, L71
MAX_ENERGY = 5  # L12
STEP_CAP = 200  # L44


def _cost(card):
    return CARDS[card][1]


def _power(card):
    return CARDS[card][2]


def _has(card, keyword):
    return keyword in CARDS[card][4]


def _is_creature(card):
    return not _has(card, "spell")


class _GameOver(Exception):
    """Raised the moment a side's life is 0 or less (L42: the episode ends at once)."""


class Duel:
    def __init__(self):
        self.np_random = None
        self.my_life = MAX_LIFE
        self.opp_life = MAX_LIFE
        self.energy = 0
        self.turn = 1
        self.steps = 0
        # env.toml: list attributes are variable-length (written up to their first pad value)
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

    # ------------------------------------------------------------------ state helpers
    # env.toml: list attributes are variable-length lists written up to their first pad
    # value (0 for cards and healths, -1 for ready flags); a fixed-length list padded with
    # its pad value is read the same way. During a step the game works on these lists held
    # in `self._s`, written back (unpadded) at the end of the step; only the observation pads.
    @staticmethod
    def _cut(xs, pad):
        out = []
        for x in xs:
            x = int(x)
            if x == pad:
                break
            out.append(x)
        return out

    def _load(self):
        cut = self._cut
        board = {}
        for side in ("my", "opp"):
            cards = cut(getattr(self, side + "_board"), 0)
            health = cut(getattr(self, side + "_health"), 0)
            ready = cut(getattr(self, side + "_ready"), -1)
            board[side] = [
                [c, health[i] if i < len(health) else 0, ready[i] if i < len(ready) else 0]
                for i, c in enumerate(cards)
            ]
        self._s = {
            "life": {"my": int(self.my_life), "opp": int(self.opp_life)},
            "deck": {"my": cut(self.my_deck, 0), "opp": cut(self.opp_deck, 0)},
            "hand": {"my": cut(self.my_hand, 0), "opp": cut(self.opp_hand, 0)},
            "board": board,
        }
        self._first_dead = None

    def _store(self):
        s = self._s
        self.my_life = int(s["life"]["my"])
        self.opp_life = int(s["life"]["opp"])
        self.my_deck = [int(x) for x in s["deck"]["my"]]
        self.opp_deck = [int(x) for x in s["deck"]["opp"]]
        self.my_hand = [int(x) for x in s["hand"]["my"]]
        self.opp_hand = [int(x) for x in s["hand"]["opp"]]
        for side in ("my", "opp"):
            b = s["board"][side]
            setattr(self, side + "_board", [int(c[0]) for c in b])
            setattr(self, side + "_health", [int(c[1]) for c in b])
            setattr(self, side + "_ready", [int(c[2]) for c in b])

    @staticmethod
    def _other(side):
        return "opp" if side == "my" else "my"

    # ------------------------------------------------------------------ life
    # L42: the episode ends at once when a side's life is 0 or less; the side whose life
    # reached 0 first decides the reward (Q5: checked after each draw, effect and attack)
    def _check_end(self):
        if self._first_dead is None:
            for side in ("my", "opp"):
                if self._s["life"][side] <= 0:
                    self._first_dead = side
                    break
        if self._first_dead is not None:
            raise _GameOver()

    def _lose_life(self, side, amount):
        self._s["life"][side] -= amount

    # L32: life gained never goes above 15 (Q3: for every life gain)
    def _gain_life(self, side, amount):
        life = self._s["life"][side]
        self._s["life"][side] = max(life, min(MAX_LIFE, life + amount))

    # ------------------------------------------------------------------ drawing
    def _draw(self, side):
        deck = self._s["deck"][side]
        hand = self._s["hand"][side]
        # L25: an empty deck gives no card and its drawer loses 1 life
        if not deck:
            self._lose_life(side, 1)
            self._check_end()
            return
        # L23: the top card of the deck (L75: the first card of the list)
        card = deck.pop(0)
        # L24: a full hand (6 cards) sends the drawn card to the discard pile
        if len(hand) >= HAND_SIZE:
            return  # discard piles are not part of the state (env.toml)
        hand.append(card)

    # ------------------------------------------------------------------ damage and deaths
    # L30: a creature at 0 health or less dies, goes to its owner's discard pile, and the
    # board closes up behind it
    def _remove_dead(self):
        for side in ("my", "opp"):
            self._s["board"][side] = [c for c in self._s["board"][side] if c[1] > 0]

    # ------------------------------------------------------------------ attacking
    # L16, L38: every ready creature attacks, in board order (oldest first); each becomes not
    # ready
    def _attack_all(self, side):
        while True:
            # no creature becomes ready during the attacks, so the first ready creature left
            # is the next one in board order (L30: dead ones have left the board)
            attacker = next((c for c in self._s["board"][side] if c[2]), None)
            if attacker is None:
                return
            attacker[2] = 0
            self._attack(side, attacker)
            self._check_end()

    def _attack(self, side, attacker):
        other = self._other(side)
        card = attacker[0]
        # L28: the first creature with Guard on the opposing board, if there is one
        target = None
        for c in self._s["board"][other]:
            if _has(c[0], "guard"):
                target = c
                break
        if target is not None:
            # L29: each deals damage equal to its power to the other at the same time
            dealt = _power(card)
            taken = _power(target[0])
            target[1] -= dealt
            attacker[1] -= taken
            # L32: damage a Drain creature deals makes its owner gain that much life (Q4: the
            # damage dealt is the creature's full power, L29, even past the target's health)
            if _has(card, "drain"):
                self._gain_life(side, dealt)
            if _has(target[0], "drain"):
                self._gain_life(other, taken)
            # L30
            self._remove_dead()
        else:
            # L28, L31: otherwise it attacks the opposing side's life
            dealt = _power(card)
            self._lose_life(other, dealt)
            # L32
            if _has(card, "drain"):
                self._gain_life(side, dealt)

    # ------------------------------------------------------------------ playing cards
    # L18: a card you cannot pay for, an empty position, or a creature when the board already
    # holds 4 creatures is an illegal play
    def _can_play(self, side, pos, energy):
        hand = self._s["hand"][side]
        if pos >= len(hand):
            return False
        card = hand[pos]
        if _cost(card) > energy:
            return False
        if _is_creature(card) and len(self._s["board"][side]) >= BOARD_SIZE:
            return False
        return True

    def _play(self, side, pos):
        """Plays the (legal, paid for) card at hand position pos for side."""
        other = self._other(side)
        # L15: the card leaves the hand; the hand closes up (Q6: before its effect)
        card = self._s["hand"][side].pop(pos)
        if _is_creature(card):
            # L20: a played creature goes to the end of the board, not ready unless Swift
            health = CARDS[card][3]
            self._s["board"][side].append([card, health, 1 if _has(card, "swift") else 0])
            # L51: Scout: when played draw a card
            if _has(card, "draw1"):
                self._draw(side)
            # L53: Firebrand: when played deal 1 damage to each opposing creature
            if _has(card, "ping"):
                for c in self._s["board"][other]:
                    c[1] -= 1
                # L30
                self._remove_dead()
            # L54: Cleric: when played its owner gains 3 life
            if _has(card, "heal3"):
                self._gain_life(side, 3)
        else:
            # L20: a played spell takes effect and goes to its caster's discard pile
            if card == 14:
                # L60: Bolt: the opposing side loses 3 life
                self._lose_life(other, 3)
            elif card == 15:
                # L61: Mend: its caster gains 4 life
                self._gain_life(side, 4)
            elif card == 16:
                # L62, L76: Gamble: one call of random(); heads (below 0.5): the opposing side
                # loses 4 life; tails: its caster draws 2 cards
                if self.np_random.random() < 0.5:
                    self._lose_life(other, 4)
                else:
                    self._draw(side)
                    self._draw(side)
            elif card == 17:
                # L63: Rally: every creature of its caster becomes ready
                for c in self._s["board"][side]:
                    c[2] = 1
            elif card == 18:
                # L64: Quake: deal 2 damage to every creature on both boards
                for s in ("my", "opp"):
                    for c in self._s["board"][s]:
                        c[1] -= 2
                # L30
                self._remove_dead()
        self._check_end()

    # ------------------------------------------------------------------ turns
    def _start_my_turn(self):
        # L12: draw one card, then energy is the turn counter, never more than 5
        self._draw("my")
        self.energy = min(int(self.turn), MAX_ENERGY)
        # L13: your creatures become ready
        for c in self._s["board"]["my"]:
            c[2] = 1

    def _opponent_turn(self):
        # L36: it draws one card, sets its energy as you do, its creatures become ready
        self._draw("opp")
        energy = min(int(self.turn), MAX_ENERGY)
        for c in self._s["board"]["opp"]:
            c[2] = 1
        # L37: it plays the first card in hand order it can legally play, until it can play
        # none
        while True:
            pos = next(
                (p for p in range(len(self._s["hand"]["opp"]))
                 if self._can_play("opp", p, energy)),
                None,
            )
            if pos is None:
                break
            # L18: playing a card costs its energy
            energy -= _cost(self._s["hand"]["opp"][pos])
            self._play("opp", pos)
        # L38: then it attacks with every ready creature, as you do
        self._attack_all("opp")

    # ------------------------------------------------------------------ the contract
    def reset(self, seed=None, options=None):
        # L74, L77: the episode's one generator; only the shuffles and Gamble use it
        self.np_random = np.random.default_rng(seed)
        # L75: your deck shuffled first, then the opponent's; a shuffle is permutation of the
        # card numbers 1 to 20, its first card the top of the deck
        my_deck = [int(c) for c in self.np_random.permutation(np.arange(1, DECK_SIZE + 1))]
        opp_deck = [int(c) for c in self.np_random.permutation(np.arange(1, DECK_SIZE + 1))]
        # L7: 15 life, empty hand, board and discard pile
        self._s = {
            "life": {"my": MAX_LIFE, "opp": MAX_LIFE},
            "deck": {"my": my_deck, "opp": opp_deck},
            "hand": {"my": [], "opp": []},
            "board": {"my": [], "opp": []},
        }
        self._first_dead = None
        # L8: each side draws 4 cards, you first
        for side in ("my", "opp"):
            for _ in range(4):
                self._draw(side)
        # L9: you take the first turn; the turn counter starts at 1
        self.turn = 1
        self.steps = 0
        # L12-13: the start of your first turn (Q1: it draws too)
        self._start_my_turn()
        self._store()
        del self._s
        return self._get_obs(), {}

    # L14: each action is one step of the episode
    def step(self, action):
        action = int(action)
        self._load()
        reward = 0.0  # L43
        try:
            if 0 <= action <= 5:
                # L15, L18: play the card at that hand position
                if self._can_play("my", action, int(self.energy)):
                    # L18: playing a card costs its energy (paid before it takes effect)
                    self.energy = int(self.energy) - _cost(self._s["hand"]["my"][action])
                    self._play("my", action)
                else:
                    # L19: an illegal play does nothing except cost you 1 life
                    self._lose_life("my", 1)
                    self._check_end()
            elif action == 6:
                # L16: attack with every ready creature
                self._attack_all("my")
            elif action == 7:
                # L17, L35: end your turn; the opponent takes a whole turn in the same step
                self._opponent_turn()
                # L39: the turn counter goes up by 1 and your turn begins
                self.turn = int(self.turn) + 1
                self._start_my_turn()
        except _GameOver:
            pass
        terminated = self._first_dead is not None
        if terminated:
            # L42: +1 if the opponent's life reached 0 first, -1 if yours did
            reward = 1.0 if self._first_dead == "opp" else -1.0
        self._store()
        del self._s
        del self._first_dead
        self.steps = int(self.steps) + 1
        # L44: cut off (truncated, not ended) after 200 steps (Q8)
        truncated = (not terminated) and self.steps >= STEP_CAP
        return self._get_obs(), reward, terminated, truncated, {}

    # L68-71: what you observe
    def _get_obs(self):
        # the observation reads the state the same way a step does (lists up to their first
        # pad value) and pads each list to its fixed length with 0 ("0 if empty", L70-71)
        self._load()
        s = self._s
        del self._s
        del self._first_dead

        def pad(xs, n):
            xs = [int(x) for x in xs][:n]
            return xs + [0] * (n - len(xs))

        obs = [
            s["life"]["my"], s["life"]["opp"], int(self.energy), int(self.turn),  # L69
            len(s["deck"]["my"]), len(s["deck"]["opp"]),  # L69
        ]
        obs += pad(s["hand"]["my"], HAND_SIZE)  # L70
        # L71: each board as 4 cards, 4 healths, 4 ready flags (Q9), 0 where empty
        for side in ("my", "opp"):
            b = s["board"][side]
            obs += pad([c[0] for c in b], BOARD_SIZE)
            obs += pad([c[1] for c in b], BOARD_SIZE)
            obs += pad([c[2] for c in b], BOARD_SIZE)
        # env.toml: 36 numbers in [0, 201] (Q7: a life below 0 shows as 0); L82: the turn
        # counter has no limit and is observed as it is (201 at most in a 200-step episode)
        return np.clip(np.asarray(obs, dtype=np.float32), 0.0, 201.0)
