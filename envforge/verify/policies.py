"""Action sources for rollouts: uniform random, sticky random, and the spec's scripted policies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from envforge.backends.base import State
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


def legal_random(spec: EnvSpec, rng: np.random.Generator, state: State) -> np.ndarray:
    """A uniform legal action of each row's current player (its ``[agents]`` action mask);
    uniform over every action where the row's player has none legal."""
    assert spec.agents is not None and spec.agents.action_mask is not None
    assert spec.agents.current_player is not None
    seat = state[spec.agents.current_player].astype(np.int64)
    legal = state[spec.agents.action_mask][np.arange(len(seat)), seat]
    legal = np.where(legal.any(axis=1, keepdims=True), legal, True)
    scores = np.where(legal, rng.random(legal.shape), -1.0)
    return scores.argmax(axis=1).astype(np.int32)


@dataclass
class SeatPolicy:
    """Several agents, turn by turn: seat 0 plays ``first`` (a scripted policy; None: random
    legal), every other seat a random legal action. ``act`` reads the state (whose turn it is,
    the masks), which the episode loops hand to a policy with ``reads_state``."""

    spec: EnvSpec
    rng: np.random.Generator
    name: str
    first: ScriptedPolicy | None = None
    reads_state: bool = True

    def reset(self, n: int) -> None:
        pass

    def act(self, obs: np.ndarray, t: np.ndarray, state: State | None = None) -> np.ndarray:
        assert state is not None and self.spec.agents is not None
        actions = legal_random(self.spec, self.rng, state)
        if self.first is not None:
            seat = state[self.spec.agents.current_player or ""]
            actions = np.where(seat == 0, self.first.act(obs, t), actions).astype(np.int32)
        return actions


def rollout_policies(spec: EnvSpec, rng: np.random.Generator) -> list[Policy]:
    policies: list[Policy] = [UniformPolicy(spec, rng), StickyPolicy(spec, rng)]
    scripted = [ScriptedPolicy(spec, p.expr, p.name) for p in spec.policy]
    seats = spec.agents
    if seats is None or seats.turns != "sequential" or seats.action_mask is None:
        return policies + list(scripted)
    # several agents: random legal moves for every seat, each scripted policy as seat 0
    # against random legal moves, and uniform actions (illegal ones included) as before
    policies.append(SeatPolicy(spec, rng, "random_legal"))
    policies += [SeatPolicy(spec, rng, f"{p.name}_vs_random_legal", p) for p in scripted]
    return policies
