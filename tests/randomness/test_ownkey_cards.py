"""Own-key ports of the card games: Leduc Hold'em and UNO drawing from their own
``jax.random`` key (``tests/ports/{leduc,uno}_ownkey``), verified in distribution mode, and a
bug planted in a branch random play reaches in under 1% of steps caught at default scale:

* Leduc: the opponent never folds when it faces the second round's capped raise (random play:
  the opponent folds there in about 0.7% of steps). Found among the spread and screened states
  (the ``always_raise`` policy's states reach the cap).
* UNO: the reshuffle when the draw pile runs out leaves the newest played card on top
  (random play reshuffles in about 0.03% of steps). Found by the rare-event check: the spec's
  ``reshuffle`` event fires in under 2% of the candidates' steps, so the candidates that fired
  it are tested with twice the samples (rlcard's reshuffle lines are not in the adapter file
  coverage counts, so line steering alone does not see them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

LEDUC_DIR = ROOT / "tests" / "ports" / "leduc_ownkey"
UNO_DIR = ROOT / "tests" / "ports" / "uno_ownkey"
OPTIONS = VerifyOptions(isolate=False, sandbox=None)
NEVER_FOLDS_AT_THE_CAP = (
    "    ok = legal(state, jnp.int32(1))\n",
    "    ok = legal(state, jnp.int32(1))\n"
    "    ok = ok.at[FOLD].set(~((state.round_counter == 1) & (state.have_raised == 2)))\n",
)
NEWEST_STAYS_ON_TOP = (
    "    order = jnp.argsort(jnp.where(at < n, jax.random.uniform(key, (CAPACITY,)), 2.0))\n",
    "    order = jnp.argsort(jnp.where(at < n - 1, jax.random.uniform(key, (CAPACITY,)), 2.0))\n",
)


def _reference(name: str, cls: str) -> object:
    """The reference adapter, imported from its file under a name of its own."""
    import importlib.util

    path = ROOT / "references" / name / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"ownkey_ref_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, cls)()


def test_random_play_sees_the_leduc_opponent_fold_to_the_second_round_cap_rarely() -> None:
    env = _reference("leduc", "LeducVsRandom")
    facing = {"cap": False}
    spy_on = env.opponent.step  # type: ignore[attr-defined]

    def spy(state: dict) -> int:
        game = env.game  # type: ignore[attr-defined]
        facing["cap"] = game.round_counter == 1 and game.round.have_raised == 2
        action = spy_on(state)
        facing["fold"] = facing["cap"] and action == 2  # rlcard: call, raise, fold, check
        return action

    env.opponent.step = spy  # type: ignore[attr-defined]
    rng = np.random.default_rng(6)
    np.random.seed(7)  # the random agent's module-level draws
    steps = folds = 0
    for _ in range(6000):
        env.reset(seed=int(rng.integers(2**31)))  # type: ignore[attr-defined]
        done = False
        while not done:
            facing["fold"] = False
            done = env.step(int(rng.integers(4)))[2]  # type: ignore[attr-defined]
            steps += 1
            folds += facing["fold"]
    assert 0.002 < folds / steps < 0.01, (folds, steps)


def test_random_play_reshuffles_the_uno_deck_in_under_one_percent_of_steps() -> None:
    env = _reference("uno", "UnoVsRandom")
    rng = np.random.default_rng(8)
    np.random.seed(9)
    steps = reshuffles = 0
    for _ in range(150):
        env.reset(seed=int(rng.integers(2**31)))  # type: ignore[attr-defined]
        done, t = False, 0
        while not done and t < 200:
            before = len(env.game.dealer.deck)  # type: ignore[attr-defined]
            done = env.step(int(rng.integers(61)))[2]  # type: ignore[attr-defined]
            steps, t = steps + 1, t + 1
            reshuffles += len(env.game.dealer.deck) > before  # type: ignore[attr-defined]
    assert steps > 2000 and reshuffles / steps < 0.002, (reshuffles, steps)


@pytest.mark.slow
def test_own_key_leduc_whose_opponent_never_folds_at_the_cap_fails_l1(tmp_path: Path) -> None:
    broken = apply_patch(LEDUC_DIR / "leduc.py", tmp_path, NEVER_FOLDS_AT_THE_CAP)
    level = verify(load_spec(LEDUC_DIR / "env.toml"), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.check == "step.distribution"
    # a fold ends the round unbanked; a call banks it and goes to the showdown
    assert finding.fields[0] in ("banked", "raised", "round_counter", "reward"), finding.message


@pytest.mark.slow
def test_own_key_uno_whose_reshuffle_keeps_the_newest_card_on_top_fails_l1(
    tmp_path: Path,
) -> None:
    broken = apply_patch(UNO_DIR / "uno.py", tmp_path, NEWEST_STAYS_ON_TOP)
    level = verify(load_spec(UNO_DIR / "env.toml"), broken.path.parent, [1], OPTIONS).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert "reshuffle" in finding.message, finding.message
    assert finding.fields[0] in ("deck", "hands", "played", "target", "target_color", "obs")
    assert level.stats["rare_events"].get("reshuffle", 1.0) < 0.02


@pytest.mark.slow
@pytest.mark.parametrize("port_dir", [LEDUC_DIR, UNO_DIR], ids=["leduc", "uno"])
def test_own_key_card_port_verifies_equivalent_l0_to_l3(port_dir: Path) -> None:
    spec = load_spec(port_dir / "env.toml")
    report = verify(spec, port_dir, [0, 1, 2, 3], OPTIONS)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert set(report.levels[1].stats["detectable"]["events"]) == {e.name for e in spec.event}
