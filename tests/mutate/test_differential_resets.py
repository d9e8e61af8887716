"""The differential's reset comparison in ``sync`` mode (distributions only) pairs the seeds.

The Taxi own-key campaign (scale 0.2) called ``constant:155:1`` (a fickle passenger with
probability 0.33 instead of 0.3 at reset) **equivalent**: KS and support tests on 4096 resets a
side do not see a shift of 0.03. Both sides reset from the same seeds, so the seeds where only
one side gives a value are counted each way; they balance whenever the distributions agree.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch
from scipy import stats

from envforge.mutate.differential import Differential, Effort
from envforge.mutate.differential_dist import paired_shift_pvalue
from envforge.spec import load_spec

TAXI_DIR = ROOT / "tests" / "ports" / "taxi_ownkey"
MORE_FICKLE = (
    "    fickle = jax.random.uniform(k_fickle) < 0.3\n",
    "    fickle = jax.random.uniform(k_fickle) < 0.33\n",
)


def test_a_small_one_way_shift_is_seen_and_independent_redraws_are_not() -> None:
    rng = np.random.default_rng(0)
    u, other = rng.random(4096), rng.random(4096)
    original = (u < 0.3).astype(float)
    shifted = (u < 0.33).astype(float)  # the same draw, a higher threshold
    redrawn = (other < 0.3).astype(float)  # another key: the same distribution
    assert stats.ks_2samp(original, shifted).pvalue > 0.01  # what the triage used alone
    assert paired_shift_pvalue(original, shifted) < 1e-20
    assert paired_shift_pvalue(original, redrawn) > 0.05
    many = rng.integers(0, 100, 4096).astype(float)  # too many values: no paired test
    assert paired_shift_pvalue(many, many + 1) == 1.0


@pytest.mark.slow  # ~50 s at load 14 on the 2-core Xeon (three JAX drivers compile)
def test_taxi_fickle_probability_mutant_differs_at_reset_and_a_copy_does_not(
    tmp_path: Path,
) -> None:
    from envforge.backends.jax import JaxDriver

    spec = load_spec(TAXI_DIR / "env.toml")
    assert spec.rng.mode == "sync"
    mutant = apply_patch(TAXI_DIR / "taxi.py", tmp_path / "mutant", MORE_FICKLE)
    copy = apply_patch(TAXI_DIR / "taxi.py", tmp_path / "copy")
    resets_only = Effort(reset_seeds=8192, sampled_states=0, rollout_envs=1, rollout_steps=0)
    base = JaxDriver(spec, TAXI_DIR)
    changed = Differential(base, JaxDriver(spec, mutant.path.parent)).run(resets_only, "resets")
    assert changed.differing.get("fickle_step"), changed.to_dict()
    assert changed.witness is not None and changed.witness["test"] == "paired shift"
    same = Differential(base, JaxDriver(spec, copy.path.parent)).run(resets_only, "resets")
    assert not same.differs, same.to_dict()
