"""Run whole episodes of a policy on any Driver (reference or port) and record what happened.

The Driver has no auto-reset, so episodes are run side by side from one batched ``reset`` and
each env drops out of the stepped batch when it terminates, truncates or reaches the cap. The
policy always acts on the full, fixed-shape observation batch (one jit shape); only the
active rows are stepped. Every named event of the spec is counted per episode, together with
the reward collected on the steps where it fired (that is what localizes a reward difference).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import numpy as np

from envforge.backends.base import Driver, State, take_state
from envforge.spec import EnvSpec
from envforge.train.policy import Policy

ActionFn = Callable[[np.ndarray], np.ndarray]
"""Observations ``[B, *obs_shape]`` -> actions ``[B, ...]``."""


@dataclass
class EpisodeStats:
    """Per-episode outcome of one batch of episodes on one side."""

    side: str
    seeds: np.ndarray
    group: np.ndarray
    """Training-seed index of the policy that played each episode (0 for a single policy)."""
    returns: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    initial_state: State
    event_counts: dict[str, np.ndarray] = field(default_factory=dict)
    event_rewards: dict[str, np.ndarray] = field(default_factory=dict)
    """Sum of the rewards of the steps on which each event fired, per episode."""
    rewards: np.ndarray | None = None
    """``[max_len, B]`` per-step rewards (0 after an episode ended)."""
    wall_s: float = 0.0

    @property
    def num_episodes(self) -> int:
        return len(self.returns)

    @property
    def steps(self) -> int:
        return int(self.lengths.sum())

    def by_group(self, values: np.ndarray) -> list[np.ndarray]:
        return [values[self.group == g] for g in np.unique(self.group)]


def run_episodes(
    driver: Driver,
    spec: EnvSpec,
    act: ActionFn,
    seeds: np.ndarray,
    group: np.ndarray | None = None,
    max_steps: int | None = None,
    record_rewards: bool = True,
) -> EpisodeStats:
    """Play one episode per seed (all in one batch) until every one has ended."""
    start = time.perf_counter()
    cap = min(max_steps or spec.episode_cap, spec.episode_cap)
    seeds = np.asarray(seeds, dtype=np.uint32)
    n = len(seeds)
    state = {k: np.array(v) for k, v in driver.reset(seeds).items()}  # writable copies
    initial = {k: v.copy() for k, v in state.items()}
    obs = np.array(driver.observe(state))
    events = {ev.name: spec.expression(ev.expr) for ev in spec.event}

    returns = np.zeros(n)
    lengths = np.zeros(n, dtype=np.int64)
    terminated = np.zeros(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    counts = {name: np.zeros(n, dtype=np.int64) for name in events}
    event_rewards = {name: np.zeros(n) for name in events}
    trace: list[np.ndarray] = []
    # A step that draws (an RNG tape or distribution spec) draws afresh on every step of every
    # episode: Driver.step seeds its draws from the state and action alone, so the same deal
    # met twice would be played out the same way (and a port's key derived from its canonical
    # state can repeat across states), which made L4 compare quasi-deterministic opponents.
    fresh = (
        np.random.default_rng(np.random.SeedSequence([int(x) for x in seeds]))
        if spec.rng.step != "none"
        else None
    )

    for _ in range(cap):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        actions = np.asarray(act(obs))[idx]
        before = take_state(state, idx)
        # step a fixed-size batch (live rows, padded with copies of the first) so a jitted
        # port compiles one shape rather than one per number of unfinished episodes
        pad = np.zeros(n - len(idx), dtype=np.int64)
        rows = take_state(state, np.concatenate([idx, idx[pad]]))
        if fresh is None:
            padded = driver.step(rows, np.concatenate([actions, actions[pad]]))
        else:
            padded, _ = driver.step_draws(
                rows,
                np.concatenate([actions, actions[pad]]),
                fresh.integers(0, 2**63, size=n, dtype=np.uint64),
                None,
            )
        tr = padded.take(slice(0, len(idx)))
        for name, expr in events.items():
            fired = np.broadcast_to(
                np.asarray(
                    expr(**tr.expression_inputs(before, actions)),
                    dtype=bool,
                ),
                idx.shape,
            )
            counts[name][idx] += fired
            event_rewards[name][idx] += np.where(fired, tr.reward, 0.0)
        returns[idx] += tr.reward
        lengths[idx] += 1
        if record_rewards:
            row = np.zeros(n, dtype=np.float64)
            row[idx] = tr.reward
            trace.append(row)
        for key, value in tr.state.items():
            state[key][idx] = value
        obs[idx] = tr.obs
        terminated[idx] = tr.terminated
        done = tr.terminated | tr.truncated | (lengths[idx] >= cap)
        active[idx[done]] = False

    return EpisodeStats(
        side=driver.side,
        seeds=seeds,
        group=np.zeros(n, dtype=np.int64) if group is None else np.asarray(group),
        returns=returns,
        lengths=lengths,
        terminated=terminated,
        initial_state=initial,
        event_counts=counts,
        event_rewards=event_rewards,
        rewards=np.stack(trace) if trace else np.zeros((0, n)),
        wall_s=time.perf_counter() - start,
    )


# ---- action functions -----------------------------------------------------------------------


def policy_action_fn(policy: Policy, per_seed: int, deterministic: bool, seed: int = 0) -> ActionFn:
    """Acts with seed k's policy on rows ``k * per_seed ... (k + 1) * per_seed - 1``."""
    key = jax.random.PRNGKey(seed)
    k = policy.num_seeds

    def act(obs: np.ndarray) -> np.ndarray:
        nonlocal key
        sub = key
        if not deterministic:  # greedy actions need no randomness (and no extra dispatch)
            key, sub = jax.random.split(key)
        grouped = obs.reshape(k, per_seed, *obs.shape[1:])
        actions = policy.actions(grouped, sub, deterministic)
        return actions.reshape(k * per_seed, *actions.shape[2:])

    return act


def random_action_fn(spec: EnvSpec, seed: int = 0) -> ActionFn:
    """Uniform random actions of the spec's action space."""
    rng = np.random.default_rng(seed)
    return lambda obs: spec.action.sample(rng, len(obs))


def evaluate_policy(
    driver: Driver,
    spec: EnvSpec,
    policy: Policy,
    episodes_per_seed: int,
    seeds: np.ndarray,
    deterministic: bool = True,
    max_steps: int | None = None,
    action_seed: int = 0,
) -> EpisodeStats:
    """N episodes per training seed. With N·K ``seeds`` each training seed plays its own N
    starts, so every episode is independent of the others (what L4's statistics assume: K
    policies that share their starts share the starts' luck, and their mean varies more than
    the within-policy spread says); with N seeds all K play the same N starts."""
    k = policy.num_seeds
    seeds = np.asarray(seeds, dtype=np.uint32)
    if len(seeds) >= k * episodes_per_seed:
        env_seeds = seeds[: k * episodes_per_seed]
    else:
        env_seeds = np.tile(seeds[:episodes_per_seed], k)
    group = np.repeat(np.arange(k), episodes_per_seed)
    act = policy_action_fn(policy, episodes_per_seed, deterministic, action_seed)
    return run_episodes(driver, spec, act, env_seeds, group, max_steps)
