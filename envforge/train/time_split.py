"""Where PPO's training time goes: env stepping, policy inference and the update.

The host-loop trainer times its own phases as it runs (``Laps``: consecutive laps of one clock,
so the phases add up to the training time exactly). The fused trainer is one jitted scan with no
clock inside, so ``fused_split`` compiles each phase alone at the run's shapes (seeds, envs,
steps) and times one update's worth of each: the env stepping on a recorded rollout's actions,
the acting on its observations, the learning on the rollout itself. Those three are the split;
the fused run's own time per update is kept beside them (fusion makes it a little less than
their sum, or XLA's choices a little more).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from types import ModuleType
from typing import Any

import jax

from envforge.spec import EnvSpec
from envforge.train.config import PPOConfig
from envforge.train.port_env import AutoResetEnv
from envforge.train.ppo import FusedPPO, network_for

PHASES = ("env", "policy", "update", "other")
"""``other``: the host loop's bookkeeping between phases (buffers, episode returns)."""


@dataclass
class TimeSplit:
    """Seconds of training spent in each phase, over ``updates`` PPO updates."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    updates: int = 0
    how: str = "timed in the run"
    fused_s: float | None = None
    """The fused run's own training time over the same updates (``fused_split`` only)."""

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    def share(self, phase: str) -> float:
        total = self.total_s
        return self.seconds[phase] / total if total > 0 else float("nan")

    def over(self, updates: int) -> TimeSplit:
        """This split's per-update seconds (and fused time) over ``updates`` updates."""
        factor = updates / max(self.updates, 1)
        fused = None if self.fused_s is None else self.fused_s * factor
        seconds = {k: v * factor for k, v in self.seconds.items()}
        return TimeSplit(seconds, updates, self.how, fused)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "how": self.how,
            "updates": self.updates,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
            "share": {k: round(self.share(k), 4) for k in PHASES},
        }
        if self.fused_s is not None:
            out["fused_s"] = round(self.fused_s, 4)
        return out


class Laps:
    """One running clock whose laps are charged to phases: nothing between two laps is lost."""

    def __init__(self) -> None:
        self.split = TimeSplit()
        self._last = time.perf_counter()

    def lap(self, phase: str) -> float:
        """Charge the time since the last lap to ``phase`` (``None``-like phases are not kept:
        pass ``"compile"`` for time that is not training); returns the lap's seconds."""
        now = time.perf_counter()
        spent, self._last = now - self._last, now
        if phase in self.split.seconds:
            self.split.seconds[phase] += spent
        return spent


def _best_time(fn: Any, *args: Any, repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` warm calls (compilation and a first call excluded)."""
    compiled = fn.lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return best


def fused_split(
    module: ModuleType,
    spec: EnvSpec,
    cfg: PPOConfig,
    seeds: int = 1,
    fused_s_per_update: float | None = None,
    repeats: int = 3,
) -> TimeSplit:
    """One fused update's phases, each compiled and timed alone at the run's shapes."""
    trainer = FusedPPO(cfg, AutoResetEnv(module, spec.episode_cap), network_for(spec, cfg))
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    carry = jax.jit(jax.vmap(trainer.init))(keys)
    rollout = jax.jit(jax.vmap(partial(trainer.rollout, num_steps=cfg.num_steps)))
    after, traj = rollout(carry)  # a real rollout: its actions and observations feed the phases

    def step_env(episodes: Any, xs: tuple[jax.Array, jax.Array]) -> tuple[Any, jax.Array]:
        key, action = xs
        env_keys = jax.random.split(key, cfg.num_envs)
        env_action = trainer.net.env_action(action)
        episodes, res = jax.vmap(trainer.env.step)(env_keys, episodes, env_action)
        return episodes, res.obs

    def env_only(carry: Any, actions: jax.Array) -> jax.Array:
        step_keys = jax.random.split(carry.key, cfg.num_steps)
        return jax.lax.scan(step_env, carry.episodes, (step_keys, actions))[1]

    def act(params: Any, xs: tuple[jax.Array, jax.Array]) -> tuple[Any, Any]:
        key, x = xs
        head_out, value = trainer.net.apply(params, x)
        action = trainer.net.sample(key, params, head_out)
        return params, (action, trainer.net.log_prob(params, head_out, action), value)

    def policy_only(carry: Any, obs: jax.Array) -> Any:
        step_keys = jax.random.split(carry.key, cfg.num_steps)
        return jax.lax.scan(act, carry.learner.params, (step_keys, obs))[1]

    seconds = {
        "env": _best_time(jax.jit(jax.vmap(env_only)), carry, traj.action, repeats=repeats),
        "policy": _best_time(jax.jit(jax.vmap(policy_only)), carry, traj.obs, repeats=repeats),
        "update": _best_time(jax.jit(jax.vmap(trainer.learn)), after, traj, repeats=repeats),
        "other": 0.0,
    }
    how = "phases timed alone"
    return TimeSplit(seconds, 1, how, fused_s_per_update)


def host_learning_added_back(split: TimeSplit, learn_s_per_update: float) -> TimeSplit:
    """The host loop's split with the first (compiling) update's learning counted as one
    measured update, as its training time is."""
    seconds = dict(split.seconds)
    seconds["update"] += learn_s_per_update
    return TimeSplit(seconds, split.updates, split.how, split.fused_s)
