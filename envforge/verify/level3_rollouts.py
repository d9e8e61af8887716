"""Level 3 — rollouts: do whole episodes match, under several policies?

For each policy (uniform random, sticky random, and the spec's scripted policies, which reach
the rare events) a batch of episodes runs to its end on both sides with the same actions.

* exact mode: free-running. Each side steps its own state; the first mismatch is a Finding
  with the episode's seed, the step, the full action history and the state before.
* tolerance mode: re-synced per step (the port steps from the reference's state, compared
  within tolerance), plus free-running port episodes whose return and length distributions
  are compared with the reference's (two-sample KS), since chaotic dynamics amplify drift.

Per field, the largest error seen is reported, and per named event how often it happened on
each side (event coverage): an event that happens at different rates is itself a finding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envforge.spec import EnvSpec
from envforge.verify.context import VerifyContext
from envforge.verify.episodes import Tally, batch_groups, compared_groups, free_port_episodes
from envforge.verify.findings import Finding
from envforge.verify.policies import rollout_policies
from envforge.verify.stats import ks_test
from envforge.verify.verdict import LevelResult


def _statistics_finding(
    ctx: VerifyContext,
    policy: str,
    name: str,
    ref: np.ndarray,
    port: np.ndarray,
    resolution: float = 0.0,
) -> Finding | None:
    if np.array_equal(np.unique(ref), np.unique(port)) and len(np.unique(ref)) == 1:
        return None
    p, _ = ks_test(ref, port)
    if p >= ctx.spec.verify.alpha:
        return None
    if name == "return" and abs(ref.mean() - port.mean()) <= resolution:
        # a systematic offset smaller than the per-step tolerance summed over an episode is
        # float rounding (e.g. a float32 terminal bonus), not a different environment
        return None
    keys = ["reward"] if name == "return" else ["terminated", "truncated"]
    ref_lines, port_lines = ctx.localize(keys)
    return Finding(
        level=3,
        check="episodes.distribution",
        message=f"policy {policy}: free-running episode {name}s differ (KS p={p:.2e}; reference mean {ref.mean():.3f}, port mean {port.mean():.3f})",
        fields=keys,
        expected={f"mean_{name}": float(ref.mean())},
        actual={f"mean_{name}": float(port.mean())},
        error={"p_value": p},
        reference_lines=ref_lines,
        port_lines=port_lines,
        extra={"policy": policy},
    )


def _coverage_finding(ctx: VerifyContext, tally: Tally) -> Finding | None:
    for policy, events in tally.events.items():
        for name, (ref_count, port_count) in events.items():
            # an excused threshold flip may legitimately change an event count by one each
            if abs(ref_count - port_count) > tally.excused.get(policy, 0):
                return Finding(
                    level=3,
                    check="events.coverage",
                    message=f"policy {policy}: event {name} happened {ref_count}x on the reference, {port_count}x on the port",
                    fields=[name],
                    expected={name: ref_count},
                    actual={name: port_count},
                    extra={"policy": policy},
                )
    return None


def run(ctx: VerifyContext) -> LevelResult:
    spec = ctx.spec
    tally = Tally()
    episodes = ctx.count(spec.verify.l3_episodes, 10)
    policies = rollout_policies(spec, ctx.rng(31))
    seeds = [
        (
            np.arange(episodes, dtype=np.uint64) + 1_000_003 * (k + 1) + ctx.options.seed * 7_777
        ).astype(np.uint32)
        for k in range(len(policies))
    ]
    groups, all_seeds = batch_groups(policies, seeds)
    finding: Finding | None = None
    port_returns = port_lengths = None
    if spec.rng.step == "distribution":
        # steps draw afresh on each side: only whole-episode statistics can be compared
        draws = ctx.rng(32)
        returns, lengths = free_port_episodes(ctx, groups, all_seeds, tally, ctx.ref, draws)
        port_returns, port_lengths = free_port_episodes(
            ctx, groups, all_seeds, tally, ctx.port, draws
        )
    else:
        finding, returns, lengths = compared_groups(ctx, groups, all_seeds, tally)
        if finding is None and spec.compare.mode == "tolerance":
            port_returns, port_lengths = free_port_episodes(ctx, groups, all_seeds, tally)
    summary: dict[str, Any] = {}
    for g in groups:
        if finding is not None:
            break
        rows = slice(g.lo, g.hi)
        if port_returns is not None and port_lengths is not None:
            resolution = 0.0
            if spec.compare.mode == "tolerance" and spec.rng.step != "distribution":
                atol, rtol = spec.tolerance(None)
                scale = float(np.max(np.abs(returns[rows]))) if g.hi > g.lo else 0.0
                resolution = atol * float(lengths[rows].max(initial=1)) + rtol * scale
            finding = _statistics_finding(
                ctx, g.policy.name, "return", returns[rows], port_returns[rows], resolution
            ) or _statistics_finding(
                ctx,
                g.policy.name,
                "length",
                lengths[rows].astype(float),
                port_lengths[rows].astype(float),
            )
        if finding is None:
            summary[g.policy.name] = {
                "episodes": episodes,
                "mean_return": float(returns[rows].mean()),
                "mean_length": float(lengths[rows].mean()),
            }
    if finding is not None:
        return LevelResult(
            3, "fail", finding.message, [finding], _stats(tally, summary, episodes, spec)
        )
    finding = _coverage_finding(ctx, tally)
    out = _stats(tally, summary, episodes, spec)
    if finding is not None:
        return LevelResult(3, "fail", finding.message, [finding], out)
    return LevelResult(
        3,
        "pass",
        f"{episodes} episodes x {len(summary)} policies agree ({tally.steps} steps)",
        stats=out,
    )


def _stats(tally: Tally, summary: dict[str, Any], episodes: int, spec: EnvSpec) -> dict[str, Any]:
    never = sorted(
        {name for ev in tally.events.values() for name, c in ev.items() if c[0] == 0}
        - {name for ev in tally.events.values() for name, c in ev.items() if c[0] > 0}
    )
    return {
        "episodes_per_policy": episodes,
        "policies": summary,
        "steps": tally.steps,
        "draws_accounted": tally.draws,
        "steps_per_second": round(2 * tally.steps / tally.seconds) if tally.seconds else None,
        "max_abs_error": tally.max_error,
        "max_ulp": tally.max_ulp,
        **({"max_abs_error_elements": tally.element_table(spec)} if tally.element_error else {}),
        "event_coverage": {
            p: {e: {"reference": c[0], "port": c[1]} for e, c in ev.items()}
            for p, ev in tally.events.items()
        },
        "events_never_seen": never,
    }
