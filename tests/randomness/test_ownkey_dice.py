"""Own-key ports of the shipped dice and coin games (issue 34): Pig (a C reference rolling
through its draw hook) and Duel (a Gamble's coin) drawing from their own ``jax.random`` key
(``tests/ports/{pig,duel}_ownkey``), verified in distribution mode, and a bug planted in a
branch random play reaches in under 1% of steps caught at default scale, naming the field:

* Pig: a winning roll must pass 50 (``>`` for ``>=``), so a roll landing exactly on 50 banks
  nothing and the turn goes on. Random play wins by a roll in about 0.3% of steps (0.08% exactly
  on 50). Found by coverage steering: pig.c's ``*reward = 1.0f`` lines run from about 1% of
  the candidates (gcov), so their witnesses are tested with twice the samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

PIG_DIR = ROOT / "tests" / "ports" / "pig_ownkey"
OPTIONS = VerifyOptions(isolate=False, sandbox=None)
WIN_ONLY_PAST_50 = (
    "    bank = turn_over | (state.me + turn >= GOAL)\n",
    "    bank = turn_over | (state.me + turn > GOAL)\n",
)


def test_random_play_wins_pig_by_a_roll_in_under_one_percent_of_steps() -> None:
    """On the C reference (its draw hook seeded per row), uniform random actions, 20,000 games."""
    from envforge.backends.c import CDriver

    spec = load_spec(ROOT / "references" / "pig" / "env.toml")
    driver = CDriver(spec, spec.root / spec.reference)
    rng = np.random.default_rng(10)
    n, steps, wins, exactly = 4000, 0, 0, 0
    for _ in range(5):
        state = driver.reset(np.zeros(n, np.uint32))
        alive = np.ones(n, bool)
        for _ in range(spec.episode_cap):
            actions = rng.integers(0, 2, n).astype(np.int32)
            seeds = rng.integers(0, 2**63, n, dtype=np.uint64)
            tr, _ = driver.step_draws(state, actions, seeds, None)
            won = alive & (tr.reward == 1)
            total = state["me"] + state["turn"] + tr.state["last"]
            steps += int(alive.sum())
            wins += int(won.sum())
            exactly += int((won & (total == 50)).sum())
            alive &= ~(tr.terminated | tr.truncated)
            state = tr.state
    assert steps > 100_000 and wins > 0 and exactly > 0, (steps, wins, exactly)
    assert wins / steps < 0.005 and exactly / steps < 0.002, (steps, wins, exactly)


def test_own_key_pig_whose_winning_roll_must_pass_50_fails_l1_naming_turn(
    tmp_path: Path,
) -> None:
    broken = apply_patch(PIG_DIR / "pig.py", tmp_path, WIN_ONLY_PAST_50)
    level = verify(load_spec(PIG_DIR / "env.toml"), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.check == "step.distribution"
    # the roll that lands on 50 leaves it in the turn total instead of banking it
    assert finding.fields[0] in ("turn", "me", "reward", "terminated"), finding.message
    assert "a rare branch" in finding.message, finding.message
    assert level.stats["rare_branch_states"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("port_dir", [PIG_DIR], ids=["pig"])
def test_own_key_dice_port_verifies_equivalent_l0_to_l3(port_dir: Path) -> None:
    spec = load_spec(port_dir / "env.toml")
    report = verify(spec, port_dir, [0, 1, 2, 3], OPTIONS)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert set(report.levels[1].stats["detectable"]["events"]) == {e.name for e in spec.event}
