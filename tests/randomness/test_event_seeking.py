"""Distribution mode seeks the spec events no candidate step fired (``distribution_seek.py``).

The FrozenLake own-key port's mutation campaign (scale 0.2) had a survivor: the goal paying 1.1
instead of 1.0. None of L1's 205 candidates' single steps reached the goal, so the spec's
``reached_goal`` event had no witness, no tested state stepped onto the goal, and the report
said "reached_goal: never seen at a tested state". Seeking steps more pool and drawn states on
the reference until the event fires, and tests the states where it did.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify import distribution_states as ds
from envforge.verify.context import VerifyContext, VerifyOptions
from envforge.verify.distribution_seek import seek_events
from envforge.verify.runner import DriverPair, verify

LAKE_DIR = ROOT / "tests" / "ports" / "frozenlake_ownkey"
QUICK = VerifyOptions(isolate=False, sandbox=None, scale=0.2)
GOAL_PAYS_MORE = (
    "    reward = jnp.where(~stuck & GOAL[s], 1.0, 0.0).astype(jnp.float32)\n",
    "    reward = jnp.where(~stuck & GOAL[s], 1.1, 0.0).astype(jnp.float32)\n",
)
NEXT_TO_GOAL = (55, 62)


@pytest.mark.slow  # about 27 s at load 8 on the 2-core Xeon (JAX import, rollouts)
def test_an_event_no_candidate_fired_is_sought_and_its_witnesses_are_tested() -> None:
    spec = load_spec(LAKE_DIR / "env.toml")
    pair = DriverPair(spec, LAKE_DIR, QUICK)
    try:
        ref, port = pair.open()
        ctx = VerifyContext(spec, ref, port, QUICK, pair.sources("port"))
        rng = ctx.rng(15)
        pool = ds.rollout_pool(ctx, rng)
        cand = ds.candidates(pool, rng, ctx.count(ds.CANDIDATES, 64))
        seeds = rng.integers(0, 2**63, size=len(cand), dtype=np.uint64)
        steering = ds.steer(ctx, cand, seeds)
        assert steering.events.get("reached_goal", []) == []  # the campaign's blind spot
        grown = seek_events(ctx, pool, cand, steering, ctx.rng(18))
        found = steering.sought["reached_goal"]
        assert found and all(row >= len(cand) for row in found)
        assert {int(grown.states["s"][row]) for row in found} <= set(NEXT_TO_GOAL)
        assert 0 < steering.seek_steps <= ctx.count(4096)
        chosen = ds.select(ctx, grown, steering, rng, 100)
        reasons = [chosen.reasons[chosen.rows.index(row)] for row in found]
        assert all("reached_goal" in r and "found by seeking" in r for r in reasons), reasons
        assert all(chosen.samples[chosen.rows.index(row)] == 100 * ds.RARE_FACTOR for row in found)
    finally:
        pair.close()


@pytest.mark.slow
def test_own_key_frozenlake_whose_goal_pays_more_fails_l1_naming_reward(tmp_path: Path) -> None:
    """The campaign's survivor (``constant:71:1``), at its scale: caught at a sought witness."""
    broken = apply_patch(LAKE_DIR / "frozenlake.py", tmp_path, GOAL_PAYS_MORE)
    level = verify(load_spec(LAKE_DIR / "env.toml"), broken.path.parent, [1], QUICK).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.fields == ["reward"], finding.message
    assert "found by seeking" in finding.message, finding.message
    assert finding.state_before["s"] in NEXT_TO_GOAL
    assert level.stats["event_seeking"]["witnesses"]["reached_goal"] > 0
    events = level.stats["detectable"]["events"]
    assert "never seen" not in events["reached_goal"], events
