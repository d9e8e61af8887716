"""Ten, version 1 (reads the bust rule as written)."""

import numpy as np


class Ten:
    def __init__(self):
        self.total = 0
        self.moves = 0

    def _get_obs(self):
        return np.array([self.total, self.moves], dtype=np.float32)

    def reset(self, seed=None):
        # L5
        self.total = 0
        self.moves = 0
        return self._get_obs(), {}

    def step(self, action):
        # L6: one or two
        self.total += 1 if int(action) == 0 else 2
        self.moves += 1
        reward = 0.0  # L9
        terminated = False
        if self.total == 10:  # L7
            reward, terminated = 1.0, True
        elif self.total > 10:  # L8: back to zero, -1, go on
            self.total = 0
            reward = -1.0
        truncated = self.moves >= 20 and not terminated  # L10
        return self._get_obs(), reward, terminated, truncated, {}
