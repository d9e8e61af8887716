"""Distribution mode with power: states from the whole horizon and steered to the
reference's lines, rare branches tested with more samples, and a true "what it could detect".

The ports under test (``tests/ports/{blackjack,frozenlake,taxi}_ownkey``) draw
from their own ``jax.random`` key, so no tape can be replayed to them; their specs are the
shipped ones with ``[rng] step = "distribution"``. The planted bugs change branches random play
reaches in under 1% of steps: a natural recognised only ace-first (Blackjack's reward, found
by coverage steering), a cell that never slips (FrozenLake's ``s``, found by screening), a
fickle passenger that may keep its destination (Taxi's ``s``, found by coverage steering).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyContext, VerifyOptions
from envforge.verify.power import ks_min_detectable, min_detectable
from envforge.verify.runner import DriverPair, verify
from envforge.verify.stats import chi_square_test, ks_test

PORT_DIR = ROOT / "tests" / "ports" / "blackjack_ownkey"
SPEC = PORT_DIR / "env.toml"
PORT = PORT_DIR / "blackjack.py"
ACE_FIRST_ONLY = (
    "    return (_count(hand) == 2) & jnp.any(hand == 1) & jnp.any(hand == 10)",
    "    return (_count(hand) == 2) & (hand[0] == 1) & (hand[1] == 10)",
)
OPTIONS = VerifyOptions(isolate=False, sandbox=None)
LAKE_DIR = ROOT / "tests" / "ports" / "frozenlake_ownkey"
TAXI_DIR = ROOT / "tests" / "ports" / "taxi_ownkey"
FICKLE_KEEPS_OLD = (
    "    others = jnp.where(index >= old_dest, index + 1, index)  # the destinations but old_dest\n",
    "    others = index  # may keep the old destination, never picks 3\n",
)
NO_SLIP_ON_62 = (
    "    pick = jax.random.randint(key, (), 0, 3)  # 0: (a - 1) % 4, 1: a, 2: (a + 1) % 4\n",
    "    pick = jax.random.randint(key, (), 0, 3)  # 0: (a - 1) % 4, 1: a, 2: (a + 1) % 4\n"
    "    pick = jnp.where(state.s == 62, 1, pick)\n",
)


def _rejections(p: float, q: float, n: int, alpha: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    x, y = rng.binomial(n, p, trials), rng.binomial(n, q, trials)
    hits = 0
    for a, b in zip(x, y, strict=True):
        table = np.array([[a, n - a], [b, n - b]])
        hits += chi_square_test(table[:, table.sum(0) > 0])[0] < alpha
    return hits / trials


@pytest.mark.parametrize("p,n,alpha", [(0.5, 2000, 1e-5), (0.1, 4000, 1e-4), (0.02, 2000, 1e-3)])
def test_the_detectable_change_is_true_just_above_and_false_well_below(
    p: float, n: int, alpha: float
) -> None:
    """The stated rise is caught ~90% of the time by the test the run uses (scipy's chi-square
    on the 2 x 2 table), a rise of 70% of it far less often."""
    rise, _ = min_detectable(p, n, alpha)
    assert rise is not None
    above = _rejections(p, p + 1.05 * rise, n, alpha, 600, 1)
    below = _rejections(p, p + 0.7 * rise, n, alpha, 600, 2)
    assert above >= 0.87, above
    assert below < 0.7, below


def test_random_play_reaches_the_planted_branch_in_under_one_percent_of_steps() -> None:
    """The bug changes the reward only when a natural dealt ten-first wins a stick."""
    import gymnasium as gym

    env = gym.make("Blackjack-v1", natural=True, sab=False).unwrapped
    rng = np.random.default_rng(3)
    steps = reached = 0
    for _ in range(20000):
        env.reset(seed=int(rng.integers(2**31)))
        done = False
        while not done:
            ten_first = env.player[0] == 10
            _, reward, done, _, _ = env.step(int(rng.integers(2)))
            steps += 1
            reached += bool(reward == 1.5 and ten_first)
    assert 0.004 < reached / steps < 0.01, reached / steps


def test_states_follow_scale_and_steering_finds_the_rare_natural_line() -> None:
    from envforge.verify import distribution_states as ds

    spec = load_spec(SPEC)
    pair = DriverPair(spec, PORT_DIR, OPTIONS)
    try:
        sizes = []
        for scale in (0.5, 1.0):
            options = VerifyOptions(isolate=False, sandbox=None, scale=scale)
            ref, port = pair.open()
            ctx = VerifyContext(spec, ref, port, options, pair.sources("port"))
            rng = ctx.rng(15)
            cand = ds.candidates(ds.rollout_pool(ctx, rng), rng, ctx.count(ds.CANDIDATES, 64))
            seeds = rng.integers(0, 2**63, size=len(cand), dtype=np.uint64)
            steering = ds.steer(ctx, cand, seeds)
            chosen = ds.select(ctx, cand, steering, rng, 100)
            spread = sum(not r.startswith(("witness", "screened")) for r in chosen.reasons)
            screened = sum(r.startswith("screened") for r in chosen.reasons)
            sizes.append((spread, screened))
            rare = steering.rare()
            lines = {
                line: Path(file).read_text().splitlines()[line - 1].strip() for file, line in rare
            }
            assert "reward = 1.5" in lines.values(), lines
            assert any("a rare branch" in r for r in chosen.reasons)
        assert sizes == [(6, 64), (12, 128)]
    finally:
        pair.close()


@pytest.mark.slow
def test_own_key_port_with_an_ace_first_natural_fails_l1_naming_reward(tmp_path: Path) -> None:
    """The proving case, at default scale: steering to the reference's ``reward = 1.5`` line
    puts naturals among the tested states, and the two-sample test on reward fails."""
    broken = apply_patch(PORT, tmp_path, ACE_FIRST_ONLY)
    level = verify(load_spec(SPEC), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.check == "step.distribution"
    assert finding.extra["element"] in ("reward", "event natural_win", "event win")
    assert "a rare branch" in finding.message
    assert level.stats["rare_branch_states"] > 0


def test_random_play_almost_never_stands_on_cell_62() -> None:
    import gymnasium as gym

    env = gym.make("FrozenLake-v1", map_name="8x8", is_slippery=True)
    rng = np.random.default_rng(4)
    steps = on_62 = 0
    for _ in range(3000):
        cell, _ = env.reset(seed=int(rng.integers(2**31)))
        done = False
        while not done:
            on_62 += cell == 62
            cell, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
            steps += 1
            done = terminated or truncated
    assert steps > 50000 and on_62 / steps < 1e-3, (on_62, steps)


@pytest.mark.slow
def test_own_key_frozenlake_that_never_slips_on_cell_62_fails_l1_naming_s(tmp_path: Path) -> None:
    """A large change at a state random play almost never reaches: one of the screened
    states (100 samples a side) stands on cell 62."""
    broken = apply_patch(LAKE_DIR / "frozenlake.py", tmp_path, NO_SLIP_ON_62)
    level = verify(load_spec(LAKE_DIR / "env.toml"), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.fields == ["s"] and finding.state_before["s"] == 62, finding.message


def test_random_play_rarely_sees_the_fickle_passenger_change_destination() -> None:
    import gymnasium as gym

    env = gym.make("Taxi-v4", is_rainy=True, fickle_passenger=True)
    rng = np.random.default_rng(5)
    steps = changed = 0
    for _ in range(600):
        s, _ = env.reset(seed=int(rng.integers(2**31)))
        done = False
        while not done:
            s2, _, terminated, truncated, _ = env.step(int(rng.integers(6)))
            steps += 1
            changed += (s % 4) != (s2 % 4)
            s, done = s2, terminated or truncated
    assert changed / steps < 2e-3, (changed, steps)


@pytest.mark.slow
def test_own_key_taxi_whose_fickle_passenger_may_keep_its_destination_fails_l1(
    tmp_path: Path,
) -> None:
    """Steering finds the reference's fickle-passenger lines; their witnesses (4000 samples a
    side) show the new destination's distribution differs."""
    broken = apply_patch(TAXI_DIR / "taxi.py", tmp_path, FICKLE_KEEPS_OLD)
    level = verify(load_spec(TAXI_DIR / "env.toml"), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.fields == ["s"] and "a rare branch" in finding.message, finding.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "port_dir", [PORT_DIR, LAKE_DIR, TAXI_DIR], ids=["blackjack", "frozenlake", "taxi"]
)
def test_own_key_port_verifies_equivalent_l0_to_l3(port_dir: Path) -> None:
    report = verify(load_spec(port_dir / "env.toml"), port_dir, [0, 1, 2, 3], OPTIONS)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    l1 = report.levels[1].stats
    assert l1["coverage_steering"] and l1["lines_untested"] == {}
    assert set(l1["detectable"]["events"]) == {
        e.name for e in load_spec(port_dir / "env.toml").event
    }


FORWARD = (
    "    pick = jax.random.randint(key, (), 0, 3)  # 0: (a - 1) % 4, 1: a, 2: (a + 1) % 4\n",
    "    u = jax.random.uniform(key)\n"
    "    pick = jnp.where(u < {p}, 1, jnp.where(u < {p} + (1 - {p}) / 2, 0, 2))\n",
)


@pytest.mark.slow
def test_the_reported_detectable_change_is_caught_just_above_and_not_well_below(
    tmp_path: Path,
) -> None:
    """A real run's detectable effect, true for planted bugs on both sides of it: the
    unbroken FrozenLake own-key port's L1 (scale 0.25) gives the Bonferroni level and samples a
    side; at them, ``min_detectable`` (what the report's sentences state) says the smallest
    rise of an outcome of probability 1/3 caught with 90% power at one state. A port whose
    move goes ahead with 1/3 + 1.1 x that rise (at every state) fails L1; one with
    1/3 + 0.25 x it passes."""
    spec = load_spec(LAKE_DIR / "env.toml")
    options = VerifyOptions(isolate=False, sandbox=None, scale=0.25)
    base = verify(spec, LAKE_DIR, [1], options).levels[0]
    assert base.status == "pass", base.summary
    stats = base.stats
    rise, _ = min_detectable(1 / 3, stats["samples_per_side"], stats["alpha_per_test"])
    assert rise is not None and 0.05 < rise < 0.3, rise
    half, _ = min_detectable(0.5, stats["samples_per_side"], stats["alpha_per_test"])
    assert f"moving by {half:.3g} is caught with 90% power" in base.summary
    status = {}
    for name, factor in (("above", 1.1), ("below", 0.25)):
        p = repr(1 / 3 + factor * rise)
        edit = (FORWARD[0], FORWARD[1].format(p=p))
        port = apply_patch(LAKE_DIR / "frozenlake.py", tmp_path / name, edit)
        level = verify(spec, port.path.parent, [1], options).levels[0]
        status[name] = (level.status, level.summary[:300])
    assert status["above"][0] == "fail", status
    assert status["below"][0] == "pass", status


FICKLE_AT_RESET = "    fickle = jax.random.uniform(k_fickle) < 0.3\n"


def _ks_rejections(p: float, q: float, n: int, alpha: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        a = (rng.random(n) < p).astype(np.float64)
        b = (rng.random(n) < q).astype(np.float64)
        hits += 2 * ks_test(a, b)[0] < alpha  # L1 halves the level: KS beside the support test
    return hits / trials


@pytest.mark.parametrize("p,n", [(0.3, 20000), (0.5, 2000)])
def test_the_reset_statement_is_true_just_above_and_false_well_below(p: float, n: int) -> None:
    """The change of a reset frequency that L1's summary states (``ks_min_detectable``) is
    caught about 90% of the time by the KS test at the level L1 uses (Taxi's: 3 fields), and
    half of it seldom."""
    alpha = 0.001 / 3
    rise = ks_min_detectable(p, n, alpha / 2)
    above = _ks_rejections(p, p + 1.05 * rise, n, alpha, 200, 3)
    below = _ks_rejections(p, p + 0.5 * rise, n, alpha, 200, 4)
    assert above >= 0.85, above
    assert below < 0.2, below


def test_own_key_taxi_fickle_a_little_more_often_at_reset_fails_l1_at_quick_scale(
    tmp_path: Path,
) -> None:
    """The campaign's survivor (a fickle passenger at reset with probability 0.33, not 0.3):
    Taxi's spec asks for 20,000 reset seeds and ``--scale 0.2`` no longer shrinks them to 400,
    which could not see it."""
    spec = load_spec(TAXI_DIR / "env.toml")
    assert spec.verify.reset_samples == 20000
    edit = (FICKLE_AT_RESET, FICKLE_AT_RESET.replace("0.3", "0.33"))
    broken = apply_patch(TAXI_DIR / "taxi.py", tmp_path, edit)
    options = VerifyOptions(isolate=False, sandbox=None, scale=0.2)
    level = verify(spec, broken.path.parent, [1], options).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.check == "reset.distribution" and finding.fields == ["fickle_step"]
    assert level.stats["reset_seeds"] == 20000
