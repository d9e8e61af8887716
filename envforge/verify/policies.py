"""Action sources for rollouts: uniform random, sticky random, and the spec's scripted policies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from envforge.spec import EnvSpec


def random_actions(spec: EnvSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    """``spec.action.sample(rng, n)``: the same draws, under the name the levels use."""
    return spec.action.sample(rng, n)


class Policy(Protocol):
    name: str

    def reset(self, n: int) -> None: ...

    def act(self, obs: np.ndarray, t: np.ndarray) -> np.ndarray: ...


@dataclass
class UniformPolicy:
    spec: EnvSpec
    rng: np.random.Generator
    name: str = "uniform"

    def reset(self, n: int) -> None:
        pass

    def act(self, obs: np.ndarray, t: np.ndarray) -> np.ndarray:
        return random_actions(self.spec, self.rng, len(obs))


@dataclass
class StickyPolicy:
    """Random actions that repeat with probability ``stick``: long runs reach far states."""

    spec: EnvSpec
    rng: np.random.Generator
    stick: float = 0.9
    name: str = "sticky"
    _last: np.ndarray | None = None

    def reset(self, n: int) -> None:
        self._last = None

    def act(self, obs: np.ndarray, t: np.ndarray) -> np.ndarray:
        fresh = random_actions(self.spec, self.rng, len(obs))
        if self._last is None or len(self._last) != len(obs):
            self._last = fresh
            return fresh
        keep = self.rng.random(len(obs)) < self.stick
        keep = keep.reshape((-1,) + (1,) * (fresh.ndim - 1))
        self._last = np.where(keep, self._last, fresh)
        return self._last


@dataclass
class ScriptedPolicy:
    """A spec expression over the observation batch ``obs`` (and episode step ``t``)."""

    spec: EnvSpec
    source: str
    name: str

    def reset(self, n: int) -> None:
        pass

    def act(self, obs: np.ndarray, t: np.ndarray) -> np.ndarray:
        value = np.asarray(self.spec.policy_expression(self.source)(obs=obs, t=t))
        if self.spec.action.type == "discrete":
            assert self.spec.action.n is not None
            return np.clip(np.broadcast_to(value, (len(obs),)), 0, self.spec.action.n - 1).astype(
                np.int32
            )
        low, high = self.spec.action.bounds()
        shaped = np.broadcast_to(
            value.reshape(len(obs), *([1] * len(self.spec.action.shape)))
            if value.ndim == 1
            else value,
            (len(obs), *self.spec.action.shape),
        )
        return np.clip(shaped, low, high).astype(np.float32)


def rollout_policies(spec: EnvSpec, rng: np.random.Generator) -> list[Policy]:
    policies: list[Policy] = [UniformPolicy(spec, rng), StickyPolicy(spec, rng)]
    policies += [ScriptedPolicy(spec, p.expr, p.name) for p in spec.policy]
    return policies
