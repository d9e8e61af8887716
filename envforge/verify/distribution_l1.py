"""L1 in distribution mode (``[rng] step = "distribution"``): choose the states
(``distribution_states.py``), test single steps from each (``distribution.check_selected``), and
say what the run could and could not have detected.

The report states, besides the verdict:

* how many states were tested and why (witnesses of reference lines, rare branches and rare
  spec events with more samples, events the candidates never fired sought beyond them
  (``distribution_seek.py``), states spread over the episode horizon and the policies);
* per spec ``[[event]]``, at how many tested states it happened and the smallest rise and fall
  of its probability there that the run catches with 90% power (``power.py``; the tests'
  own sample sizes and Bonferroni level);
* the reference lines that ran while the states were being sought but never during the tests
  (``lines_untested``): a branch no test reached, whatever the verdict says.

The reference's coverage is restarted just before the tests, so L1's coverage line is the
lines the tested samples ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.base import take_state
from envforge.coverage.lines import LineCoverage, line_ranges
from envforge.errors import DriverFailure
from envforge.verify import distribution_states as ds
from envforge.verify.context import VerifyContext
from envforge.verify.distribution import check_selected
from envforge.verify.distribution_seek import seek_events
from envforge.verify.findings import Finding
from envforge.verify.power import POWER, describe, min_detectable

GENERIC_P = (0.5, 0.1, 0.01)
"""Base probabilities at which the detectable change of any one output value is stated."""


@dataclass
class StepDistributions:
    finding: Finding | None
    stats: dict[str, Any]
    summary: str
    coverage: list[LineCoverage] | None = None
    notes: list[str] = field(default_factory=list)


def _untested(steering: ds.Steering, tested: set[ds.Line]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for file, line in sorted(set(steering.runs) - tested):
        out.setdefault(file, []).append(line)
    return out


def run(ctx: VerifyContext) -> StepDistributions:
    spec = ctx.spec
    rng = ctx.rng(15)
    samples = ctx.count(spec.rng.samples, 200)
    pool = ds.rollout_pool(ctx, rng)
    cand = ds.candidates(pool, rng, ctx.count(ds.CANDIDATES, 64))
    seeds = rng.integers(0, 2**63, size=len(cand), dtype=np.uint64)
    steering = ds.steer(ctx, cand, seeds)
    cand = seek_events(ctx, pool, cand, steering, ctx.rng(18))
    chosen = ds.select(ctx, cand, steering, rng, samples)
    rows = np.asarray(chosen.rows)
    if steering.available:
        ctx.ref.coverage_start()  # from here: the lines the tested samples run
    result, _, rates = check_selected(
        ctx,
        take_state(cand.states, rows),
        cand.actions[rows],
        chosen.samples,
        chosen.reasons,
        samples,
    )
    coverage: list[LineCoverage] | None = None
    tested: set[ds.Line] = set()
    if steering.available:
        try:
            coverage = ctx.ref.coverage_read()
        except DriverFailure:
            coverage = None
        tested = {(c.file, n) for c in coverage or [] for n, k in c.lines.items() if k > 0}
    stats = dict(result.stats)
    alpha = stats["alpha_per_test"]
    rare = steering.rare()
    untested = _untested(steering, tested) if steering.available else {}
    n_rare = sum(1 for s in chosen.samples if s > samples)
    screened = [
        s for s, r in zip(chosen.samples, chosen.reasons, strict=True) if r.startswith("screened")
    ]
    stats.update(
        states_tested=len(rows),
        states_pooled=len(pool),
        candidates_stepped=len(cand),
        pool_sources={name: int((pool.source == i).sum()) for i, name in enumerate(pool.names)},
        witness_states=sum(r.startswith("witness") for r in chosen.reasons),
        rare_branch_states=n_rare,
        rare_samples_per_side=samples * ds.RARE_FACTOR if n_rare else None,
        screened_states=len(screened),
        screen_samples_per_side=screened[0] if screened else None,
        coverage_steering=steering.available,
        reference_lines_seen=len(steering.runs),
        rare_lines={f"{ds.base_name(f)}:{n}": round(steering.share((f, n)), 5) for f, n in rare},
        rare_events={e: round(steering.event_share(e), 5) for e in steering.rare_events()},
        event_seeking={
            "steps": steering.seek_steps,
            "witnesses": {e: len(rows) for e, rows in sorted(steering.sought.items())},
        },
        lines_untested={ds.base_name(f): lines for f, lines in untested.items()},
    )
    detect = {}
    for name, at_states in sorted(rates.items()):
        seen = [(p, n) for p, n in at_states if p > 0]
        if seen:
            p_mid = float(np.median([p for p, _ in seen]))
            n_min = min(n for _, n in seen)
            detect[name] = describe(name, len(seen), len(rows), p_mid, n_min, alpha)
    for event in spec.event:
        detect.setdefault(event.name, describe(event.name, 0, len(rows), 0.0, samples, alpha))
    generic = {}
    for p in GENERIC_P:
        up, down = min_detectable(p, samples, alpha, 1)
        generic[f"p={p}"] = {"rise": up, "fall": down}
    stats["detectable"] = {
        "power": POWER,
        "events": detect,
        "one_output_value_at_one_state": generic,
    }
    notes = []
    if not steering.available:
        notes.append("the reference cannot report coverage: no steering towards unexecuted lines")
    for f, lines in untested.items():
        notes.append(
            f"reference lines {line_ranges(lines)} of {ds.base_name(f)} ran while states were sought "
            "but in no tested state's samples: no test covers them"
        )
    stats["notes"] = notes
    half = generic["p=0.5"]["rise"]
    summary = (
        f"resets agree; {stats['distribution_tests']} two-sample tests of single steps from "
        f"{len(rows)} states ({n_rare} at rare branches with {samples * ds.RARE_FACTOR} samples, "
        f"{len(screened)} screened with {screened[0] if screened else 0}, the rest {samples} a "
        "side) agree"
    )
    if half is not None:
        summary += f"; an outcome of probability 0.5 at one state moving by {half:.3g} is caught with {POWER:.0%} power"
    if notes:
        summary += "; " + "; ".join(notes)
    return StepDistributions(result.finding, stats, summary, coverage, notes)
