"""A port as gymnasium envs: ``PortVectorEnv`` (a ``gymnasium.vector.VectorEnv``) and ``PortEnv``
(a single ``gymnasium.Env``), over any ``PortBatch``.

The vector env auto-resets in gymnasium 1.x's default mode, ``AutoresetMode.NEXT_STEP`` (declared
in ``metadata["autoreset_mode"]``, as gymnasium's own vector envs and wrappers expect): the step
that ends an episode returns its last observation and flags; the next step ignores that env's
action and returns the first observation of a new episode, reward 0, both flags false.
``AutoresetMode.SAME_STEP`` is offered too (the new episode's first observation at once, the
last one in ``info["final_obs"]``). Observations, rewards and flags are the port's own; rewards
come as float64 (gymnasium's type; every float32 is exact in it); truncation is also set where a
non-terminal step reaches the spec's ``episode_cap``. Seeds: see ``episodes.py``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from envforge.envs.batches import PortBatch
from envforge.envs.episodes import Episodes
from envforge.errors import BadInput
from envforge.spec import EnvSpec


def observation_space(spec: EnvSpec) -> gym.spaces.Box:
    low, high = spec.observation.bounds()
    dtype = np.dtype(spec.observation.dtype)
    return gym.spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)


def action_space(spec: EnvSpec) -> gym.spaces.Space[Any]:
    if spec.action.type == "discrete":
        assert spec.action.n is not None
        return gym.spaces.Discrete(spec.action.n)
    low, high = spec.action.bounds()
    return gym.spaces.Box(low, high, dtype=np.float32)


def port_actions(spec: EnvSpec, actions: Any, n: int) -> np.ndarray:
    """Actions as the port takes them (int32 or float32, one row per env)."""
    out = np.ascontiguousarray(actions, dtype=spec.action.dtype)
    shape = (n, *spec.action.shape) if spec.action.type != "discrete" else (n,)
    if out.shape != shape:
        raise ValueError(f"expected actions of shape {shape}, got {out.shape}")
    return out


def _reset_rows(options: dict[str, Any] | None, n: int) -> np.ndarray:
    options = dict(options or {})
    mask = options.pop("reset_mask", None)
    if options:
        raise ValueError(f"unsupported reset options {sorted(options)} (only reset_mask)")
    rows = np.ones(n, bool) if mask is None else np.asarray(mask, dtype=bool)
    if rows.shape != (n,):
        raise ValueError(f"reset_mask must have shape ({n},), got {rows.shape}")
    return rows


class PortVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs of one port, stepped as one batch."""

    def __init__(
        self,
        spec: EnvSpec,
        batch: PortBatch,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    ) -> None:
        mode = AutoresetMode(autoreset_mode)
        if mode == AutoresetMode.DISABLED:
            raise BadInput("autoreset_mode: NEXT_STEP or SAME_STEP (the envs reset themselves)")
        self.spec_env = spec
        self.num_envs = batch.num_envs
        self.single_observation_space = observation_space(spec)
        self.single_action_space = action_space(spec)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.autoreset_mode = mode
        self.metadata = {"autoreset_mode": mode}
        self._batch = batch
        self._episodes = Episodes(self.num_envs, spec.episode_cap)
        self._autoreset = np.zeros(self.num_envs, bool)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed if isinstance(seed, int) else None)
        rows = _reset_rows(options, self.num_envs)
        seeds = self._episodes.start(rows, seed, self.np_random)
        obs = self._batch.reset(seeds, None if rows.all() else rows)
        self._autoreset[rows] = False
        return obs, {}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward32, terminated, truncated = self._batch.step(
            port_actions(self.spec_env, actions, self.num_envs)
        )
        reward = reward32.astype(np.float64)
        truncated = self._episodes.count_step(terminated, truncated)
        info: dict[str, Any] = {}
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            rows = self._autoreset
            if rows.any():  # these envs ended last step: this step starts their next episode
                fresh = self._batch.reset(self._episodes.next_episode(rows), rows)
                obs[rows] = fresh[rows]
                reward[rows] = 0.0
                terminated[rows] = False
                truncated[rows] = False
            self._autoreset = terminated | truncated
        else:
            done = terminated | truncated
            if done.any():
                final = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    final[i] = obs[i].copy()
                info = {
                    "final_obs": final,
                    "_final_obs": done.copy(),
                    "final_info": {},
                    "_final_info": done.copy(),
                }
                fresh = self._batch.reset(self._episodes.next_episode(done), done)
                obs[done] = fresh[done]
        return obs, reward, terminated, truncated, info

    def __repr__(self) -> str:
        return f"PortVectorEnv({self.spec_env.name}, num_envs={self.num_envs})"


class PortEnv(gym.Env[np.ndarray, Any]):
    """One env of a port (a batch of one) with gymnasium's single-env API; no auto-reset."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, spec: EnvSpec, batch: PortBatch) -> None:
        if batch.num_envs != 1:
            raise ValueError("PortEnv needs a batch of one env")
        self.spec_env = spec
        self.observation_space = observation_space(spec)
        self.action_space = action_space(spec)
        self._batch = batch
        self._episodes = Episodes(1, spec.episode_cap)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        rows = _reset_rows(options, 1)
        seeds = self._episodes.start(rows, seed, self.np_random)
        return self._batch.reset(seeds, None)[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated = self._batch.step(
            port_actions(self.spec_env, np.asarray(action)[None], 1)
        )
        truncated = self._episodes.count_step(terminated, truncated)
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def __repr__(self) -> str:
        return f"PortEnv({self.spec_env.name})"
