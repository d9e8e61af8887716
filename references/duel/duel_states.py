"""The spec's `[verify] constrain` hook for Duel: drawn states made ones a game can be in.

Ranges alone cannot say that a board's three lists (cards, health, ready flags) describe the
same creatures: hypothesis draws each list on its own, and a board of one creature with two
ready flags is not a state of the game (round 1 of `envforge rules compare` asked about one).
Written by a person beside the spec, not by a drafting agent.
"""

import numpy as np

# RULES.md's card list: the creatures (a spell is never on a board) and their printed health
CREATURES = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 19, 20])
HEALTH = np.zeros(21, dtype=np.int32)
HEALTH[CREATURES] = [1, 1, 3, 2, 1, 3, 2, 3, 1, 4, 6, 3, 6, 1, 7]


def _board(cards: np.ndarray, health: np.ndarray, ready: np.ndarray) -> None:
    empty = np.cumsum(cards == 0, axis=1) > 0  # a board is a list: it ends at its first 0
    spell = ~empty & (HEALTH[np.clip(cards, 0, 20)] == 0)
    cards[spell] = CREATURES[cards[spell] % len(CREATURES)]
    cards[empty] = 0
    top = HEALTH[np.clip(cards, 0, 20)]  # damage only lowers a creature's health
    health[:] = np.where(empty, 0, np.clip(health, 1, np.maximum(top, 1)))
    ready[:] = np.where(empty, -1, np.clip(ready, 0, 1))


def consistent_states(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for side in ("my", "opp"):
        _board(state[f"{side}_board"], state[f"{side}_health"], state[f"{side}_ready"])
    return state
