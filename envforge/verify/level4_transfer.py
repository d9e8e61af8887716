"""Level 4 — transfer: does a policy trained on the port score the same on the reference?

K PPO policies are trained on the port (fused JAX trainer, run as a job inside the port's
sandbox, or in a plain child process under ``--sandbox none``; a non-JAX port trains with the
host loop through its Driver, which is itself sandboxed). Each policy plays N episodes on both sides and
mean returns are compared with two one-sided tests (TOST, alpha and margin from the spec's
``[l4]``). Verdict:

* fail: the returns differ (significantly, or by at least the margin);
* inconclusive: the trained policy is not clearly better than a uniform random policy on the
  training side (a pass would be vacuous), or the test lacked the power to decide;
* pass: equivalence shown.

A failure is localized three ways: which named events happened at different rates (or paid
different rewards) on the two sides, which episodes differ most, and the first step at which
the port's transition disagrees with the reference's along the trained policy's own
trajectories (re-synced like L3, but in the states a trained policy visits).
With ``--both-directions`` the same is done for policies trained on the reference (host loop,
smaller budget).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver
from envforge.sandbox.jobs import run_job
from envforge.spec import EnvSpec
from envforge.targets import get_target
from envforge.train.child import train_port_isolated, training_result
from envforge.train.config import L4Config, PPOConfig, l4_config
from envforge.train.evaluate import EpisodeStats, evaluate_policy, random_action_fn, run_episodes
from envforge.train.host_ppo import train_host
from envforge.train.ppo import TrainResult
from envforge.train.vec_env import DriverVecEnv
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.level4_transfer_findings import (
    LEVEL,
    Direction,
    direction_findings,
    paired_episodes_differ,
    probe_mismatch,
)
from envforge.verify.stats import (
    SampleComparison,
    better_than,
    compare_samples,
    tost,
)
from envforge.verify.verdict import LevelResult

# ---- training ---------------------------------------------------------------------------------


def _jax_port_path(driver: Driver) -> Path | None:
    recipe = getattr(driver, "recipe", None)
    if recipe is not None:
        python_module = recipe.side == "port" and get_target(recipe.kind).python_module
        return Path(recipe.target) if python_module else None
    module_path = getattr(driver, "module_path", None)
    return Path(module_path) if module_path is not None else None


def _train_host_on(
    driver: Driver, spec: EnvSpec, ppo: PPOConfig, cfg: L4Config, seed: int
) -> TrainResult:
    vec = DriverVecEnv(driver, spec, cfg.seeds * ppo.num_envs, seed=seed + 7)
    return train_host(vec, spec, ppo, seeds=cfg.seeds, seed=seed)


def train_on_port(ctx: VerifyContext, cfg: L4Config) -> TrainResult:
    port = _jax_port_path(ctx.port)
    if port is None:
        return _train_host_on(ctx.port, ctx.spec, cfg.ppo, cfg, ctx.options.seed)
    sandbox = ctx.sandbox or getattr(ctx.port, "sandbox", None)  # the user's choice first
    if sandbox is None:  # --sandbox none: a plain child process, as the port's driver
        return train_port_isolated(
            port, ctx.spec, cfg.ppo, cfg.seeds, ctx.options.seed, cfg.train_timeout_s
        )
    recipe = getattr(ctx.port, "recipe", None)
    payload = run_job(
        sandbox,
        "envforge.train.child:trained_payload",
        (str(port), ctx.spec, cfg.ppo, cfg.seeds, ctx.options.seed),
        readable=(port,),
        env=dict(recipe.env) if recipe is not None else None,
        timeout_s=cfg.train_timeout_s,
        what="train",
        port=port,
    )
    return training_result(payload, ctx.spec, cfg.ppo)


# ---- one direction ----------------------------------------------------------------------------


def run_direction(
    ctx: VerifyContext, cfg: L4Config, trained_on: str, training: TrainResult
) -> Direction:
    spec = ctx.spec
    episodes = ctx.count(cfg.episodes, minimum=2)
    rng = ctx.rng(40 + (trained_on == "reference"))
    policy = training.policy
    # each training seed its own starts: episodes independent across policies (see evaluate_policy)
    seeds = rng.integers(0, 2**31, size=episodes * policy.num_seeds).astype(np.uint32)

    def evaluate(driver: Driver) -> EpisodeStats:
        return evaluate_policy(
            driver,
            spec,
            policy,
            episodes,
            seeds,
            cfg.deterministic_eval,
            cfg.eval_max_steps,
            action_seed=ctx.options.seed,
        )

    # the two sides run in their own processes: evaluate them at the same time
    with ThreadPoolExecutor(max_workers=2) as pool:
        port_job, ref_job = pool.submit(evaluate, ctx.port), pool.submit(evaluate, ctx.ref)
        port_eval, ref_eval = port_job.result(), ref_job.result()
    home = ctx.port if trained_on == "port" else ctx.ref
    home_eval = port_eval if trained_on == "port" else ref_eval
    random_seeds = rng.integers(0, 2**31, size=ctx.count(cfg.random_episodes, 2)).astype(np.uint32)
    random_eval = run_episodes(
        home,
        spec,
        random_action_fn(spec, ctx.options.seed),
        random_seeds,
        max_steps=cfg.eval_max_steps,
        record_rewards=False,
    )
    beats, gain, p_gain = better_than(
        home_eval.by_group(home_eval.returns),
        random_eval.returns,
        cfg.better_than_random,
        cfg.alpha,
    )
    paired = same_starts(port_eval, ref_eval)
    test = tost(
        port_eval.by_group(port_eval.returns),
        ref_eval.by_group(ref_eval.returns),
        cfg.margin,
        cfg.alpha,
        paired,
    )
    events, event_rewards = compare_events(port_eval, ref_eval, paired)
    return Direction(
        trained_on,
        training,
        port_eval,
        ref_eval,
        random_eval,
        test,
        beats,
        gain,
        p_gain,
        events,
        event_rewards,
    )


def _reward_per_firing(stats: EpisodeStats, name: str) -> np.ndarray:
    """Per episode in which the event fired: the mean reward of its firing steps."""
    n = stats.event_counts[name]
    return stats.event_rewards[name][n > 0] / n[n > 0]


def same_starts(port: EpisodeStats, ref: EpisodeStats) -> bool:
    """Did every episode start from the same canonical state on both sides (replicate mode)?"""
    return all(
        np.array_equal(port.initial_state[k], ref.initial_state[k]) for k in port.initial_state
    )


def compare_events(
    port: EpisodeStats, ref: EpisodeStats, paired: bool
) -> tuple[list[SampleComparison], list[SampleComparison]]:
    """Per event: counts per episode, and the mean reward of the steps on which it fired."""
    counts, rewards = [], []
    for name in port.event_counts:
        counts.append(
            compare_samples(name, port.event_counts[name], ref.event_counts[name], paired)
        )

        rewards.append(
            compare_samples(name, _reward_per_firing(port, name), _reward_per_firing(ref, name))
        )
    return counts, rewards


# ---- the level ----------------------------------------------------------------------------------


def _direction_stats(d: Direction) -> dict[str, Any]:
    tr = d.training
    return {
        "trained_on": d.trained_on,
        "status": d.status,
        "training": {
            "env_steps": tr.env_steps,
            "jit_s": tr.jit_s,
            "train_s": tr.train_s,
            "steps_per_second": tr.steps_per_second,
            "final_train_return": tr.final_return(),
        },
        "tost": d.test.to_dict(),
        "random_mean_return": float(d.random.returns.mean()),
        "gain_over_random": d.gain_over_random,
        "p_gain_over_random": d.p_gain,
        "beats_random": d.beats_random,
        "per_policy_mean_return": {
            "port": [float(g.mean()) for g in d.port.by_group(d.port.returns)],
            "reference": [float(g.mean()) for g in d.reference.by_group(d.reference.returns)],
        },
        "mean_length": {
            "port": float(d.port.lengths.mean()),
            "reference": float(d.reference.lengths.mean()),
        },
        "events": {
            c.name: {"port": c.port_mean, "reference": c.reference_mean, "p_value": c.p_value}
            for c in d.events
        },
        "reward_per_event": {
            c.name: {"port": c.port_mean, "reference": c.reference_mean, "p_value": c.p_value}
            for c in d.event_rewards
        },
        "eval_wall_s": {"port": d.port.wall_s, "reference": d.reference.wall_s},
    }


def run(ctx: VerifyContext) -> LevelResult:
    cfg = l4_config(ctx.spec)
    start = time.perf_counter()
    directions = [run_direction(ctx, cfg, "port", train_on_port(ctx, cfg))]
    if ctx.options.both_directions:
        reverse = _train_host_on(ctx.ref, ctx.spec, cfg.reverse_ppo, cfg, ctx.options.seed + 1)
        directions.append(run_direction(ctx, cfg, "reference", reverse))
    for d in directions:
        if d.status != "fail" and paired_episodes_differ(ctx.spec, cfg, d):
            d.mismatch = probe_mismatch(ctx, d.training.policy, cfg)
    statuses = [d.status for d in directions]
    status = (
        "fail"
        if "fail" in statuses
        else ("pass" if all(s == "pass" for s in statuses) else "inconclusive")
    )
    findings: list[Finding] = []
    for d in directions:
        if d.status != "pass":
            findings += direction_findings(ctx, d, cfg)
    stats = {
        "margin": cfg.margin,
        "alpha": cfg.alpha,
        "seeds": cfg.seeds,
        "episodes_per_seed": ctx.count(cfg.episodes, minimum=2),
        "deterministic_eval": cfg.deterministic_eval,
        "directions": [_direction_stats(d) for d in directions],
        "wall_s": time.perf_counter() - start,
    }
    return LevelResult(
        LEVEL, status, "; ".join(d.summary() for d in directions), findings, to_jsonable(stats)
    )
