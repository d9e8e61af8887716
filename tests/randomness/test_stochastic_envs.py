"""Taxi (rainy, fickle passenger) and Blackjack under the RNG tape: the shipped ports pass,
and ports that draw in another order or deal the wrong card fail naming the draw or element.

One cheap verify per env runs in this process at a small scale; the full L0–L3 runs are slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.verdict import Report

QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None)
TAXI_SPEC = ROOT / "references" / "taxi" / "env.toml"
TAXI_PORT = ROOT / "generated" / "taxi" / "jax" / "taxi.py"
BLACKJACK_SPEC = ROOT / "references" / "blackjack" / "env.toml"
BLACKJACK_PORT = ROOT / "generated" / "blackjack" / "jax" / "blackjack.py"


def _verify(spec: Path, port: Path, levels: list[int]) -> Report:
    return verify(load_spec(spec), port, levels, QUICK)


@pytest.mark.parametrize("spec,port", [(TAXI_SPEC, TAXI_PORT), (BLACKJACK_SPEC, BLACKJACK_PORT)])
def test_port_passes_l2_under_the_tape(spec: Path, port: Path) -> None:
    report = verify(load_spec(spec), port.parent, [2], VerifyOptions(scale=0.05, isolate=False))
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert report.levels[0].stats["draws_accounted"] > 0


def test_taxi_fickle_draw_taken_before_the_move_draw_fails_l1_as_rng_tape(tmp_path: Path) -> None:
    broken = apply_patch(
        TAXI_PORT,
        tmp_path,
        (
            "    u, draws = draws.random()\n    is_move = action < 4\n",
            "    in_taxi = state.fickle_step & ((state.s // 4) % 5 == 4)\n"
            "    index, draws = draws.choice(3, when=in_taxi)\n"
            "    u, draws = draws.random()\n    is_move = action < 4\n",
        ),
        ("    index, draws = draws.choice(3, when=fickle)\n", ""),
    )
    level = _verify(TAXI_SPEC, broken.path, [1]).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check == "rng.tape"
    assert "draw #0" in finding.message
    assert "the reference asked random() on [0, 1)" in finding.message
    assert "the port asked choice of 3" in finding.message
    # the shrunk state may be one where the transition still agrees: the draw is the finding
    assert finding.port_lines[0].line in broken.lines
    assert any("taxi.py" in loc.file for loc in finding.reference_lines)


def test_blackjack_dealer_standing_on_16_names_the_hand_element(tmp_path: Path) -> None:
    broken = apply_patch(
        BLACKJACK_PORT,
        tmp_path,
        ("needs = ~hit & (sum_hand(dealer) < 17)", "needs = ~hit & (sum_hand(dealer) < 16)"),
    )
    finding = _verify(BLACKJACK_SPEC, broken.path, [1]).levels[0].findings[0]
    assert finding.check == "rng.tape"  # the reference draws once more for the dealer
    assert "dealer" in finding.fields
    assert any(e.startswith("dealer[") for e in finding.extra["elements"])
    assert "choice of 13" in finding.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec,port",
    [
        (TAXI_SPEC, TAXI_PORT),
        (BLACKJACK_SPEC, BLACKJACK_PORT),
    ],
)
def test_port_passes_l0_to_l3_at_full_scale(spec: Path, port: Path) -> None:
    report = verify(load_spec(spec), port.parent, [0, 1, 2, 3])
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]


def test_bench_builds_the_reference_with_the_spec_options() -> None:
    from envforge.bench.python_loop import env_factory

    env = env_factory(load_spec(ROOT / "references" / "frozenlake" / "env.toml"))()
    assert env.unwrapped.desc.shape == (8, 8)  # the 8x8 map, not gymnasium's 4x4 default
    assert len(env.unwrapped.P[0][0]) == 3  # slippery: three outcomes per move
