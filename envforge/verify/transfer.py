"""Level 4 — transfer: does a policy trained on the port score the same on the reference?

K PPO policies are trained on the port (fused JAX trainer, in a child process; a non-JAX port
trains with the host loop through its Driver). Each policy plays N episodes on both sides and
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

import ast
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from envforge.backends.base import Driver
from envforge.spec import EnvSpec
from envforge.train.child import train_port_isolated
from envforge.train.config import L4Config, PPOConfig, l4_config
from envforge.train.evaluate import EpisodeStats, evaluate_policy, random_action_fn, run_episodes
from envforge.train.host_ppo import train_host
from envforge.train.policy import Policy
from envforge.train.ppo import TrainResult
from envforge.train.stats import (
    EquivalenceTest,
    SampleComparison,
    better_than,
    compare_samples,
    tost,
)
from envforge.train.vec_env import DriverVecEnv
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.report import LevelResult
from envforge.verify.rollouts import Tally, compared_episodes

LEVEL = 4


@dataclass
class Direction:
    """Train on one side, evaluate on both: everything one direction of L4 measured."""

    trained_on: str
    training: TrainResult
    port: EpisodeStats
    reference: EpisodeStats
    random: EpisodeStats
    test: EquivalenceTest
    beats_random: bool
    gain_over_random: float
    p_gain: float
    events: list[SampleComparison]
    event_rewards: list[SampleComparison]

    @property
    def status(self) -> str:
        if self.test.different:
            return "fail"
        if not self.beats_random:
            return "inconclusive"
        return "pass" if self.test.equivalent else "inconclusive"

    def summary(self) -> str:
        t = self.test
        side = f"trained on {self.trained_on}: "
        if not self.beats_random and not t.different:
            return side + (
                f"policy not clearly better than random (gain {self.gain_over_random:+.3g}, "
                f"p={self.p_gain:.2g}); equivalence would be vacuous"
            )
        verdict = "within" if t.equivalent else "NOT within"
        return side + (
            f"port {t.port.mean:.4g} vs reference {t.reference.mean:.4g}: gap {t.difference:+.3g} "
            f"(90% CI [{t.ci_low:+.3g}, {t.ci_high:+.3g}]) {verdict} ±{t.margin:g}, TOST p={t.p_value:.2g}"
        )


# ---- training ---------------------------------------------------------------------------------


def _jax_port_path(driver: Driver) -> Path | None:
    recipe = getattr(driver, "recipe", None)
    if recipe is not None:
        return Path(recipe.target) if recipe.kind == "jax" else None
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
    return train_port_isolated(
        port, ctx.spec, cfg.ppo, cfg.seeds, ctx.options.seed, cfg.train_timeout_s
    )


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


# ---- findings -----------------------------------------------------------------------------------


def event_fields(spec: EnvSpec, name: str) -> list[str]:
    """The canonical fields (and transition keys) a named event's expression reads."""
    expr = next(e.expr for e in spec.event if e.name == name)
    keys: list[str] = []
    for node in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            keys.append(node.attr)
        elif isinstance(node, ast.Name) and node.id in ("reward", "terminated", "truncated", "obs"):
            keys.append(node.id)
    return list(dict.fromkeys(keys))


def _significant(items: list[SampleComparison], alpha: float) -> list[SampleComparison]:
    """Differences significant after a Bonferroni correction over the events."""
    cut = alpha / max(1, len(items))
    return sorted((c for c in items if c.p_value < cut), key=lambda c: c.p_value)


def _episodes_table(d: Direction, limit: int = 5) -> list[dict[str, Any]]:
    """The episodes that differ most (same seed and policy on both sides; their starts
    coincide in replicate RNG mode, and are independent draws in sync mode)."""
    gap = d.port.returns - d.reference.returns
    order = np.argsort(
        -np.abs(gap) if d.test.difference == 0 else -np.sign(d.test.difference) * gap
    )
    rows = []
    for i in order[:limit]:
        rows.append(
            {
                "seed": int(d.port.seeds[i]),
                "policy": int(d.port.group[i]),
                "port_return": float(d.port.returns[i]),
                "reference_return": float(d.reference.returns[i]),
                "port_length": int(d.port.lengths[i]),
                "reference_length": int(d.reference.lengths[i]),
            }
        )
    return rows


def direction_findings(ctx: VerifyContext, d: Direction, cfg: L4Config) -> list[Finding]:
    spec = ctx.spec
    t = d.test
    rate_gaps = _significant(d.events, cfg.alpha)
    reward_gaps = [
        c
        for c in _significant(d.event_rewards, cfg.alpha)
        if abs(c.port_mean - c.reference_mean) > 1e-9
    ]
    findings: list[Finding] = []
    for c in reward_gaps:
        keys = ["reward", *[k for k in event_fields(spec, c.name) if k != "reward"]]
        ref_lines, port_lines = ctx.localize(keys)
        findings.append(
            Finding(
                level=LEVEL,
                check="transfer.event_reward",
                message=(
                    f"on steps where event {c.name} fired, the port paid {c.port_mean:.4g} reward per "
                    f"step and the reference {c.reference_mean:.4g} (p={c.p_value:.2g}; policy trained "
                    f"on the {d.trained_on})"
                ),
                fields=keys,
                expected={f"reward_per_{c.name}": c.reference_mean},
                actual={f"reward_per_{c.name}": c.port_mean},
                error={"difference": c.port_mean - c.reference_mean, "p_value": c.p_value},
                reference_lines=ref_lines,
                port_lines=port_lines,
                extra={"event": c.name},
            )
        )
    for c in rate_gaps:
        keys = event_fields(spec, c.name)
        ref_lines, port_lines = ctx.localize(keys)
        findings.append(
            Finding(
                level=LEVEL,
                check="transfer.event_rate",
                message=(
                    f"event {c.name} happened {c.port_mean:.3g}x per episode on the port and "
                    f"{c.reference_mean:.3g}x on the reference (in {c.port_fraction:.0%} vs "
                    f"{c.reference_fraction:.0%} of episodes; p={c.p_value:.2g})"
                ),
                fields=keys,
                expected={c.name: c.reference_mean},
                actual={c.name: c.port_mean},
                error={"difference": c.difference, "p_value": c.p_value},
                reference_lines=ref_lines,
                port_lines=port_lines,
                extra={"event": c.name},
            )
        )
    higher = "port" if t.difference > 0 else "reference"
    gap_fields = list(dict.fromkeys(k for f in findings for k in f.fields))
    episodes = _episodes_table(d)
    findings.insert(
        0,
        Finding(
            level=LEVEL,
            check="transfer.return_gap",
            message=(
                f"policies trained on the {d.trained_on} score higher on the {higher}: mean return "
                f"port {t.port.mean:.4g} [{t.port.ci_low:.4g}, {t.port.ci_high:.4g}] vs reference "
                f"{t.reference.mean:.4g} [{t.reference.ci_low:.4g}, {t.reference.ci_high:.4g}], "
                f"gap {t.difference:+.4g} (margin ±{t.margin:g}, TOST p={t.p_value:.2g})"
            ),
            fields=gap_fields,
            seed=episodes[0]["seed"] if episodes else None,
            expected={"mean_return": t.reference.mean},
            actual={"mean_return": t.port.mean},
            error={"return_gap": t.difference, "tost_p": t.p_value},
            detail="episodes that differ most (seed, policy, port/reference return and length):\n"
            + "\n".join(str(row) for row in episodes),
            extra={"episodes": episodes, "trained_on": d.trained_on},
        ),
    )
    probe = probe_mismatch(ctx, d.training.policy, cfg)
    if probe is not None:
        findings.insert(0, probe)
    return findings


@dataclass
class _TrainedActor:
    """One trained policy behind the L3 rollout Policy protocol (act on the live rows only)."""

    policy: Policy
    deterministic: bool
    name: str = "trained"
    _key: Any = None

    def reset(self, n: int) -> None:
        self._key = jax.random.PRNGKey(n)

    def act(self, obs: np.ndarray, t: np.ndarray) -> np.ndarray:
        n = len(obs)
        padded = 1 << max(0, (n - 1).bit_length())  # a few jit shapes, not one per batch size
        rows = np.concatenate([obs, np.repeat(obs[:1], padded - n, axis=0)])
        self._key, sub = jax.random.split(self._key)
        return self.policy.actions(rows[None], sub, self.deterministic)[0][:n]


def probe_mismatch(
    ctx: VerifyContext, policy: Policy, cfg: L4Config, per_policy: int = 4
) -> Finding | None:
    """Step both sides along the trained policies' own episodes; the first transition that
    disagrees (L3's comparison, in the states a trained policy reaches) is the localization."""
    rng = ctx.rng(49)
    for k in range(policy.num_seeds):
        seeds = rng.integers(0, 2**31, size=per_policy).astype(np.uint32)
        actor = _TrainedActor(policy.seed_slice(k), cfg.deterministic_eval)
        finding, _, _ = compared_episodes(ctx, actor, seeds, Tally())
        if finding is not None:
            finding.level = LEVEL
            finding.check = "transfer.rollout_mismatch"
            finding.message = f"trained policy {k}: {finding.message}"
            finding.extra["policy_seed"] = k
            return finding
    return None


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
