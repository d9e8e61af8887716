"""Which port seed each episode of a made env starts from, and the episode cap.

``reset(seed=s)`` starts env ``i`` of a batch from the port's own ``reset(s + i)`` (gymnasium's
vector convention), so a seeded first episode is exactly the one the verifier compared. Later
episodes of that env (auto-resets, seedless ``reset()`` calls) start from ``episode_seed(s + i,
k)`` for k = 1, 2, ...: a hash, so that a single env and env ``i`` of a vector env made from the
same seed play the same episodes, and gymnasium's own ``SyncVectorEnv`` over single envs
reproduces a vector env exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SEED_SPACE = 1 << 32


def episode_seed(base: Any, episode: Any, xp: Any = np) -> Any:
    """Port seed (uint32) of episode ``episode`` after ``reset(seed=base)``: ``base`` itself for
    episode 0, else a murmur3 finalizer of ``base`` and the episode number. ``xp`` is numpy or
    jax.numpy; arrays of uint32 in, uint32 out (products wrap, as in C)."""
    base = xp.asarray(base, dtype=xp.uint32)
    episode = xp.asarray(episode, dtype=xp.uint32)
    x = base ^ (episode * xp.uint32(0x9E3779B9))
    x = x ^ (x >> xp.uint32(16))
    x = x * xp.uint32(0x85EBCA6B)
    x = x ^ (x >> xp.uint32(13))
    x = x * xp.uint32(0xC2B2AE35)
    x = x ^ (x >> xp.uint32(16))
    return xp.where(episode == 0, base, x)


class Episodes:
    """Per-env seed bases, episode numbers and lengths of ``n`` envs, kept on the host."""

    def __init__(self, n: int, episode_cap: int) -> None:
        self.episode_cap = episode_cap
        self.base = np.zeros(n, np.uint32)
        self.episode = np.zeros(n, np.uint32)
        self.length = np.zeros(n, np.int64)
        self.seeded = False

    def start(self, rows: np.ndarray, seed: Any, np_random: np.random.Generator) -> np.ndarray:
        """Port seeds for a ``reset`` of ``rows`` (bool mask): from ``seed`` (an int: ``seed +
        i`` for env ``i``; or one seed per env) when given, else the next episode of each env
        (its first, from ``np_random``, if it was never seeded)."""
        n = len(self.base)
        if seed is not None:
            seeds = np.asarray(seed, dtype=np.int64)
            if seeds.ndim == 0:
                seeds = seeds + np.arange(n, dtype=np.int64)
            if seeds.shape != (n,):
                raise ValueError(f"reset(seed=...): expected an int or {n} seeds")
            self.base[rows] = (seeds % SEED_SPACE).astype(np.uint32)[rows]
            self.episode[rows] = 0
            self.seeded = True
        elif not self.seeded:
            self.base[rows] = np_random.integers(0, SEED_SPACE, n, dtype=np.uint32)[rows]
            self.episode[rows] = 0
            self.seeded = True
        else:
            self.episode[rows] += np.uint32(1)
        self.length[rows] = 0
        seeds_out: np.ndarray = episode_seed(self.base, self.episode)
        return seeds_out

    def next_episode(self, rows: np.ndarray) -> np.ndarray:
        """Port seeds (for every env; meaningful in ``rows``) of an auto-reset of ``rows``."""
        self.episode[rows] += np.uint32(1)
        self.length[rows] = 0
        seeds_out = np.zeros(len(self.base), np.uint32)
        # hashed for the ended envs only: a few per step in a large batch
        seeds_out[rows] = episode_seed(self.base[rows], self.episode[rows])
        return seeds_out

    def count_step(self, terminated: np.ndarray, truncated: np.ndarray) -> np.ndarray:
        """One more step for every env; the port's truncation flags, also set where a
        non-terminal step reaches the spec's episode cap (the ports shipped here truncate at
        the cap themselves, so their flags come back unchanged)."""
        self.length += 1
        capped: np.ndarray = truncated | (~terminated & (self.length >= self.episode_cap))
        return capped
