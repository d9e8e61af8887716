"""Auto-resetting vector envs on the host, for the non-fused PPO loop.

Two kinds: any Driver (reference or port; the loop resets finished rows itself because drivers
never auto-reset) and a plain ``gymnasium`` vector env (what a CleanRL-style baseline would
use; it is the fair speed baseline for gymnasium references).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from envforge.backends.base import Driver, State, take_state
from envforge.spec import EnvSpec


@dataclass
class HostStep:
    obs: np.ndarray
    """Observations to act on next (fresh episodes' first ones where an episode ended)."""
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    """Observations the step produced, before any reset."""
    episode_return: np.ndarray
    """Return of the episode each row just finished (meaningful where terminated | truncated)."""

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated


class VecEnv(Protocol):
    num_envs: int

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> HostStep: ...

    def close(self) -> None: ...


class DriverVecEnv:
    """``num_envs`` rows of a Driver, reset with fresh seeds when they end or reach the cap."""

    def __init__(self, driver: Driver, spec: EnvSpec, num_envs: int, seed: int = 0) -> None:
        self.driver = driver
        self.spec = spec
        self.num_envs = num_envs
        self._next_seed = (seed * 1_000_003) % 2**32
        self._state: State = {}
        self._length = np.zeros(num_envs, dtype=np.int64)
        self._return = np.zeros(num_envs)

    def _seeds(self, n: int) -> np.ndarray:
        seeds = (self._next_seed + np.arange(n, dtype=np.uint64)) % 2**32
        self._next_seed = int((self._next_seed + n) % 2**32)
        return seeds.astype(np.uint32)

    def reset(self) -> np.ndarray:
        self._state = {
            k: np.array(v) for k, v in self.driver.reset(self._seeds(self.num_envs)).items()
        }
        self._length[:] = 0
        self._return[:] = 0.0
        return np.array(self.driver.observe(self._state))

    def step(self, actions: np.ndarray) -> HostStep:
        tr = self.driver.step(self._state, actions)
        self._length += 1
        self._return += tr.reward
        truncated = ~tr.terminated & (tr.truncated | (self._length >= self.spec.episode_cap))
        done = tr.terminated | truncated
        obs = np.array(tr.obs)
        state = {k: np.array(v) for k, v in tr.state.items()}
        finished = self._return.copy()
        if done.any():
            idx = np.flatnonzero(done)
            fresh = self.driver.reset(self._seeds(len(idx)))
            for key, value in fresh.items():
                state[key][idx] = value
            obs[idx] = self.driver.observe(take_state(state, idx))
            self._length[idx] = 0
            self._return[idx] = 0.0
        self._state = state
        return HostStep(obs, tr.reward, tr.terminated, truncated, np.array(tr.obs), finished)

    def close(self) -> None:
        pass


class GymnasiumVecEnv:
    """``gymnasium.make_vec`` (synchronous, same-step auto-reset) behind the same interface, or
    a gymnasium vector env built elsewhere (``vector_env``: ``envforge.make(...,
    autoreset_mode="SameStep")`` of a port), which must auto-reset in the same step."""

    def __init__(self, env_id: str, num_envs: int, seed: int = 0, vector_env: Any = None) -> None:
        import gymnasium as gym

        self.num_envs = num_envs
        self._seed = seed
        self._env: Any = vector_env or gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
        mode = self._env.metadata.get("autoreset_mode")
        if mode != gym.vector.AutoresetMode.SAME_STEP or self._env.num_envs != num_envs:
            raise ValueError(f"{env_id}: needs {num_envs} envs auto-resetting in the same step")
        self._return = np.zeros(num_envs)

    def reset(self) -> np.ndarray:
        obs, _ = self._env.reset(seed=self._seed)
        self._return[:] = 0.0
        return np.asarray(obs)

    def step(self, actions: np.ndarray) -> HostStep:
        obs, reward, terminated, truncated, info = self._env.step(actions)
        reward = np.asarray(reward, dtype=np.float64)
        done = terminated | truncated
        self._return += reward
        final_obs = np.array(obs)
        if done.any():
            for i in np.flatnonzero(info["_final_obs"]):
                final_obs[i] = info["final_obs"][i]
        finished = self._return.copy()
        self._return[done] = 0.0
        return HostStep(np.asarray(obs), reward, terminated, truncated, final_obs, finished)

    def close(self) -> None:
        self._env.close()


class SeedCounter:
    """Reset seeds ``start, start + 1, ...`` in the order envs ask for them."""

    def __init__(self, start: int = 0) -> None:
        self.next = start

    def take(self, n: int) -> np.ndarray:
        out = (self.next + np.arange(n, dtype=np.uint64)) % 2**32
        self.next += n
        return out.astype(np.uint32)


class ObjectsVecEnv:
    """Env objects (``make()``: a reference's own class, or ``gymnasium.make``) stepped one
    after another in Python, each reset with the next seed when its episode ends: a Python
    reference stepped the way users step it (as ``envforge bench`` does)."""

    def __init__(self, make: Callable[[], Any], num_envs: int, seed: int = 0) -> None:
        self.envs = [make() for _ in range(num_envs)]
        self.num_envs = num_envs
        self.seeds = SeedCounter(seed)
        self.returns = np.zeros(num_envs)

    def reset(self) -> np.ndarray:
        seeds = self.seeds.take(self.num_envs)
        self.returns[:] = 0.0
        first = [env.reset(seed=int(s))[0] for env, s in zip(self.envs, seeds, strict=True)]
        return np.stack([np.asarray(o, np.float32) for o in first])

    def step(self, actions: np.ndarray) -> HostStep:
        n = self.num_envs
        obs, final_obs = [], []
        reward, terminated, truncated = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
        for k, (env, action) in enumerate(
            zip(self.envs, np.asarray(actions).tolist(), strict=True)
        ):
            o, r, term, trunc, _ = env.step(action)
            o = np.asarray(o, np.float32)  # a gymnasium tuple observation (Blackjack) too
            final_obs.append(o)
            reward[k], terminated[k], truncated[k] = r, term, trunc
            if term or trunc:
                o = np.asarray(env.reset(seed=int(self.seeds.take(1)[0]))[0], np.float32)
            obs.append(o)
        self.returns += reward
        finished = self.returns.copy()
        self.returns[terminated | truncated] = 0.0
        return HostStep(np.stack(obs), reward, terminated, truncated, np.stack(final_obs), finished)

    def close(self) -> None:
        pass
