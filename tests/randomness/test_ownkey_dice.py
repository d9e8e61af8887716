"""Own-key ports of the shipped dice and coin games: Pig (a C reference rolling
through its draw hook) and Duel (a Gamble's coin) drawing from their own ``jax.random`` key
(``tests/ports/{pig,duel}_ownkey``), verified in distribution mode, and a bug planted in a
branch random play reaches in under 1% of steps caught at default scale, naming the field:

* Pig: a winning roll must pass 50 (``>`` for ``>=``), so a roll landing exactly on 50 banks
  nothing and the turn goes on. Random play wins by a roll in about 0.3% of steps (0.08% exactly
  on 50). Found by coverage steering: pig.c's ``*reward = 1.0f`` lines run from about 1% of
  the candidates (gcov), so their witnesses are tested with twice the samples.
* Duel: a Gamble that comes up tails draws its caster one card instead of two. Random play
  flips tails in about 0.75% of steps (a Gamble of either side in about 1.5%). Found by
  coverage steering: duel.py's Gamble lines are rare branches, and at their witnesses (4000
  samples a side) the caster's deck differs. Duel's L1 steps its Python reference from 176
  states at default scale: minutes, so both Duel checks are slow.
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
DUEL_DIR = ROOT / "tests" / "ports" / "duel_ownkey"
OPTIONS = VerifyOptions(isolate=False, sandbox=None)
WIN_ONLY_PAST_50 = (
    "    bank = turn_over | (state.me + turn >= GOAL)\n",
    "    bank = turn_over | (state.me + turn > GOAL)\n",
)
TAILS_DRAWS_ONE = (
    "    g = _draw(g, side, gamble & ~heads)\n    g = _draw(g, side, gamble & ~heads)\n",
    "    g = _draw(g, side, gamble & ~heads)\n",
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


def test_random_play_flips_a_duel_gamble_tails_in_under_one_percent_of_steps() -> None:
    """On the Python reference, its generator's coin watched, uniform random actions."""
    import importlib.util

    path = ROOT / "references" / "duel" / "duel.py"
    module_spec = importlib.util.spec_from_file_location("ownkey_ref_duel", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    env = module.Duel()
    flips: list[float] = []

    class Coin:
        def __init__(self, generator: np.random.Generator) -> None:
            self.generator = generator

        def random(self) -> float:
            flips.append(float(self.generator.random()))
            return flips[-1]

    rng = np.random.default_rng(12)
    steps = tails = 0
    for _ in range(1500):
        env.reset(seed=int(rng.integers(2**31)))
        env.np_random = Coin(env.np_random)
        done = False
        while not done:
            flips.clear()
            _, _, terminated, truncated, _ = env.step(int(rng.integers(8)))
            steps += 1
            tails += any(u >= 0.5 for u in flips)  # RULES.md: heads is a number below 0.5
            done = terminated or truncated
    assert steps > 20_000 and 0.003 < tails / steps < 0.01, (tails, steps)


@pytest.mark.slow
def test_own_key_duel_whose_gamble_draws_one_card_on_tails_fails_l1(tmp_path: Path) -> None:
    broken = apply_patch(DUEL_DIR / "duel.py", tmp_path, TAILS_DRAWS_ONE)
    level = verify(load_spec(DUEL_DIR / "env.toml"), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.check == "step.distribution"
    # the caster's deck keeps a card (and its hand lacks one); obs counts the deck
    assert finding.fields[0] in ("my_deck", "my_hand", "opp_deck", "opp_hand", "obs")
    assert "a rare branch" in finding.message, finding.message


@pytest.mark.slow
@pytest.mark.parametrize("port_dir", [PIG_DIR, DUEL_DIR], ids=["pig", "duel"])
def test_own_key_dice_port_verifies_equivalent_l0_to_l3(port_dir: Path) -> None:
    spec = load_spec(port_dir / "env.toml")
    report = verify(spec, port_dir, [0, 1, 2, 3], OPTIONS)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert set(report.levels[1].stats["detectable"]["events"]) == {e.name for e in spec.event}
