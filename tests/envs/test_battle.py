"""The JavaScript battle reference and its JAX port: they agree step for step, a port with one
type-chart entry changed fails L1 with the move and the types in the finding, a repair prompt
for a wrong move effect names the move, the whole port verifies at L0-L3 and transfers a
trained policy at L4 (slow)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK_SWEEP, ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

pytestmark = pytest.mark.skipif(
    subprocess.run(["which", "node"], capture_output=True).returncode != 0, reason="no node"
)

SPEC = ROOT / "references" / "battle" / "env.toml"
PORT = ROOT / "generated" / "battle" / "jax" / "battle.py"
SWORDS_DANCE = "        [0, STATUS, 0, 0, 0, E_SELF_STAGE, ATK, 2, 100],  # Swords Dance"
"""Swords Dance: the user's attack +2 stages."""
FIGHTING_ROW = "        [4, 2, 2, 2, 2, 4, 2, 2, 1, 1, 2],"
"""The chart's fighting row: 2x against normal and ice (stored times two: 4)."""


def test_node_reference_and_jax_port_agree_on_random_battles() -> None:
    from envforge.backends.jax import JaxDriver
    from envforge.backends.node import NodeDriver

    spec = load_spec(SPEC)
    ref, port = NodeDriver(spec, spec.reference_path()), JaxDriver(spec, PORT.parent)
    try:
        rng = np.random.default_rng(7)
        state = ref.reset(np.arange(64, dtype=np.uint32))
        seen_done = 0
        for _ in range(40):
            actions = rng.integers(0, 6, 64).astype(np.int32)
            a, b = ref.step(state, actions), port.step(state, actions)
            for k in a.state:
                np.testing.assert_array_equal(a.state[k], b.state[k], err_msg=k)
            np.testing.assert_array_equal(a.obs, b.obs)
            np.testing.assert_array_equal(a.reward, b.reward)
            np.testing.assert_array_equal(a.terminated, b.terminated)
            done = a.terminated | a.truncated
            seen_done += int(done.sum())
            fresh = ref.reset(rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32))
            state = {
                k: np.where(done.reshape(-1, *[1] * (v.ndim - 1)), fresh[k], v)
                for k, v in a.state.items()
            }
        assert seen_done > 10  # whole battles were played, not only their first turns
    finally:
        ref.close()


@pytest.mark.slow
def test_a_changed_type_chart_entry_is_found_with_the_move_and_types(tmp_path: Path) -> None:
    """Fighting against ice made neutral (4 -> 2): L1 fails, and the finding names a fighting
    move, the ice-type target and the chart entry the reference used."""
    neutral = FIGHTING_ROW.replace("2, 4, 2", "2, 2, 2", 1)
    patched = apply_patch(PORT, tmp_path / "port", (FIGHTING_ROW, neutral))
    options = VerifyOptions(scale=0.2, seed_sweep=QUICK_SWEEP)
    report = verify(load_spec(SPEC), patched.path.parent, [1], options)
    [level] = report.levels
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    said = finding.extra["reference_explains"]
    assert "the reference says:" in finding.message
    assert "(fighting)" in said and "ice" in said and "x2" in said, said


@pytest.mark.slow
def test_a_repair_prompt_for_a_wrong_move_effect_names_the_move(tmp_path: Path) -> None:
    """Swords Dance raising attack by one stage instead of two: the repair prompt's finding
    (rendered without the port listing, whose table comments name every move) says which move
    was used, by whom, on whom."""
    from envforge.prompts.render import repair_task

    weak = SWORDS_DANCE.replace("ATK, 2,", "ATK, 1,")
    patched = apply_patch(PORT, tmp_path / "port", (SWORDS_DANCE, weak))
    # the port's step takes minutes to compile on a loaded 2-core machine: more than the
    # driver's default 120 s per call
    options = VerifyOptions(scale=0.2, seed_sweep=QUICK_SWEEP, timeout_s=600.0)
    report = verify(load_spec(SPEC), patched.path.parent, [1], options)
    [level] = report.levels
    assert level.status == "fail", level.summary
    finding = report.first_finding()
    assert finding is not None and "stages" in finding.fields, finding
    prompt = repair_task(finding, report, 1, "battle.py", None, "0-3", [ROOT, tmp_path])
    assert "uses Swords Dance" in prompt, prompt
    assert "the reference says:" in prompt


@pytest.mark.slow
def test_battle_port_verifies_l0_to_l3() -> None:
    report = verify(load_spec(SPEC), PORT.parent, [0, 1, 2, 3], VerifyOptions())
    assert report.verdict == "equivalent", report.to_dict()


@pytest.mark.slow
def test_battle_port_transfers_a_trained_policy_at_l4() -> None:
    """L4 with the spec's [l4] table: PPO on the port, greedy evaluation on both sides, TOST
    within one monster's faint (0.25) of return; replicate mode pairs the episodes."""
    report = verify(load_spec(SPEC), PORT.parent, [4], VerifyOptions(timeout_s=600.0))
    [level] = report.levels
    assert level.status == "pass", (level.summary, level.stats)
