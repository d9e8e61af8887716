"""Level 4's data and findings: what one direction of transfer measured (``Direction``), and
the findings that localize a failure — event rates and rewards, the episodes that differ most,
and the first transition that disagrees along the trained policies' own episodes
(``probe_mismatch``). The level itself is ``level4_transfer.py``."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from envforge.spec import EnvSpec
from envforge.train.config import L4Config
from envforge.train.evaluate import EpisodeStats
from envforge.train.policy import Policy
from envforge.train.ppo import TrainResult
from envforge.verify.context import VerifyContext
from envforge.verify.episodes import Tally, compared_episodes
from envforge.verify.findings import Finding
from envforge.verify.stats import EquivalenceTest, SampleComparison

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
    mismatch: Finding | None = None
    """A transition that disagrees along the trained policies' own episodes, sought when paired
    episodes of a deterministic env and policy came out different (``paired_episodes_differ``)."""

    @property
    def status(self) -> str:
        if self.test.different or self.mismatch is not None:
            return "fail"
        if not self.beats_random:
            return "inconclusive"
        return "pass" if self.test.equivalent else "inconclusive"

    def summary(self) -> str:
        t = self.test
        side = f"trained on {self.trained_on}: "
        if not self.beats_random and not t.different and self.mismatch is None:
            return side + (
                f"policy not clearly better than random (gain {self.gain_over_random:+.3g}, "
                f"p={self.p_gain:.2g}); equivalence would be vacuous"
            )
        verdict = "within" if t.equivalent else "NOT within"
        if self.mismatch is not None:
            side += "paired episodes differ (a deterministic policy from the same starts), "
        return side + (
            f"port {t.port.mean:.4g} vs reference {t.reference.mean:.4g}: gap {t.difference:+.3g} "
            f"(90% CI [{t.ci_low:+.3g}, {t.ci_high:+.3g}]) {verdict} ±{t.margin:g}, TOST p={t.p_value:.2g}"
        )


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
    probe = d.mismatch or probe_mismatch(ctx, d.training.policy, cfg)
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


def paired_episodes_differ(spec: EnvSpec, cfg: L4Config, d: Direction) -> bool:
    """Whether episodes that had to be identical were not: with exact comparison, no draws
    inside step and replicated resets, the same start and a deterministic policy give the same
    episode on two equivalent envs, so a paired episode whose return or length differs is a
    difference of the envs, however small next to the margin (pong's port paying nothing for
    late returns: a gap of -0.97 points within ±3, every such episode differing)."""
    exact = spec.compare.mode == "exact" and spec.rng.step == "none"
    paired = spec.rng.mode == "replicate" and cfg.deterministic_eval
    if not (exact and paired) or len(d.port.returns) != len(d.reference.returns):
        return False
    return bool(
        np.any(d.port.returns != d.reference.returns)
        or np.any(d.port.lengths != d.reference.lengths)
    )


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
