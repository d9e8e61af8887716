"""Ten, version 2 (reads the bust rule as the end of the game)."""

import numpy as np


class Ten:
    def __init__(self):
        self.total = 0
        self.moves = 0

    def reset(self, seed=None):
        self.total, self.moves = 0, 0  # L5
        return np.array([0, 0], dtype=np.float32), {}

    def step(self, action):
        step = 2 if int(action) == 1 else 1  # L6
        self.total += step
        self.moves += 1
        # L7
        if self.total == 10:
            return self._get_obs(), 1.0, True, False, {}
        # L8: a bust loses the game
        if self.total > 10:
            return self._get_obs(), -1.0, True, False, {}
        # L9, L10
        return self._get_obs(), 0.0, False, self.moves >= 20, {}

    def _get_obs(self):
        return np.array([self.total, self.moves], dtype=np.float32)
