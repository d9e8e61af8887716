"""The differential in distribution mode (``mutate/differential_dist.py``): a step that differs
from the same key is only a suspect.

The Blackjack own-key campaign (scale 0.2) counted ``rng:70:1`` (the hit card drawn from
``fold_in(hit_key, 1)``) a survivor against the verifier: its steps differ per key, but
``hit_key`` feeds only that draw, so the card has the same distribution and the mutant is the
same environment. ``compare:75:1`` (the dealer hits on 17) differs in distribution.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, apply_patch

from envforge.mutate.differential import Differential, Effort
from envforge.spec import load_spec

BLACKJACK_DIR = ROOT / "tests" / "ports" / "blackjack_ownkey"
REKEYED_HIT = (
    "DECK[jax.random.randint(hit_key, (), 0, 13)]",
    "DECK[jax.random.randint(jax.random.fold_in(hit_key, 1), (), 0, 13)]",
)
HITS_ON_17 = ("~hit & (sum_hand(dealer) < 17)", "~hit & (sum_hand(dealer) <= 17)")
SMALL = Effort(reset_seeds=1024, sampled_states=8192, rollout_envs=16, rollout_steps=16)


@pytest.mark.slow  # ~1 min at load 20 on the 2-core Xeon (three JAX drivers compile)
def test_a_rekeyed_draw_is_no_difference_and_a_dealer_hitting_17_is(tmp_path: Path) -> None:
    from envforge.backends.jax import JaxDriver

    spec = load_spec(BLACKJACK_DIR / "env.toml")
    assert spec.rng.step == "distribution"
    base = JaxDriver(spec, BLACKJACK_DIR)
    rekeyed = apply_patch(BLACKJACK_DIR / "blackjack.py", tmp_path / "rekeyed", REKEYED_HIT)
    same = Differential(base, JaxDriver(spec, rekeyed.path.parent)).run(SMALL, "small")
    assert not same.differs and same.unconfirmed > 0, same.to_dict()
    hits = apply_patch(BLACKJACK_DIR / "blackjack.py", tmp_path / "hits17", HITS_ON_17)
    changed = Differential(base, JaxDriver(spec, hits.path.parent)).run(SMALL, "small")
    assert changed.differs and "dealer" in changed.differing, changed.to_dict()
    assert changed.witness is not None and changed.witness["confirmed"]


def test_an_equivalence_reason_says_when_same_key_differences_were_not_borne_out() -> None:
    """Triage's reason said "identical steps" for a distribution-mode mutant whose steps
    differed from the same key (suspects) but not in distribution."""
    from envforge.mutate.differential import DifferentialResult
    from envforge.mutate.triage import differential_equivalence

    result = DifferentialResult("light", 1024, "distribution", transitions=5000)
    assert "identical steps on 5000 transitions" in str(differential_equivalence(result, True))
    result.unconfirmed = 7
    reason = str(differential_equivalence(result, True))
    assert "identical steps" not in reason
    assert "7 differed from the same key but not in distribution" in reason
