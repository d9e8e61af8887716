"""The RNG tape: a reference's draws inside step are recorded and replayed to the port, and a
port that draws differently (another probability, another number or kind of draws) fails.

Broken ports are exact patches of the shipped FrozenLake port (``conftest.apply_patch``); each
verify runs at a small scale in this process (no child processes) so the tests stay cheap.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.rng.draws import KIND_CODE
from envforge.rng.recorder import RowLog, UnsupportedDraw, module_draws, recording
from envforge.spec import EnvSpec, load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.verdict import Report

FROZENLAKE_SPEC = ROOT / "references" / "frozenlake" / "env.toml"
FROZENLAKE_PORT = ROOT / "generated" / "frozenlake" / "jax" / "frozenlake.py"
QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None)


def _verify(spec: EnvSpec, port: Path, levels: list[int]) -> Report:
    return verify(spec, port, levels, QUICK)


class _Dice:
    """A Python reference-like object holding all three generator types."""

    def __init__(self) -> None:
        self.np_gen = np.random.default_rng(0)
        self.legacy = np.random.RandomState(0)
        self.py = random.Random(0)

    def roll(self) -> tuple:
        return (
            self.np_gen.integers(1, 7),
            self.legacy.rand(),
            self.py.choice("abc"),
            self.np_gen.choice([10, 20], p=[0.25, 0.75]),
        )


def test_recorder_records_every_generator_type_and_restores_them() -> None:
    dice = _Dice()
    originals = (dice.np_gen, dice.legacy, dice.py)
    log = RowLog()
    with recording(dice, seed=7, log=log):
        first = dice.roll()
    assert (dice.np_gen, dice.legacy, dice.py) == originals
    kinds = [k for k, *_ in log.draws]
    assert kinds == [KIND_CODE[k] for k in ("integers", "random", "choice", "choice")]
    assert log.draws[0][1:3] == (1.0, 7.0)  # integers on [1, 7)
    assert log.draws[2][1] == 3.0  # a choice among three
    assert log.draws[3][2] != 0.0  # weighted: the weights' fingerprint is recorded
    assert first[2] == "abc"[int(log.draws[2][3])]  # the value recorded is the index
    again = RowLog()
    with recording(dice, seed=7, log=again):
        assert dice.roll() == first  # the same seed gives the same draws
    assert any("test_rng_tape.py" in site for site in log.sites)


def test_recorder_refuses_a_draw_it_cannot_record() -> None:
    dice = _Dice()
    with pytest.raises(UnsupportedDraw, match="exponential"), recording(dice, 1, RowLog()):
        dice.np_gen.exponential()


class _NoGenerators:
    pass


def test_module_level_draws_are_recorded_and_the_modules_restored() -> None:
    """rlcard's RandomAgent draws with ``np.random.choice``; ``random.random`` is the other
    global generator references use."""
    choice, rand = np.random.choice, random.random
    log = RowLog()
    with recording(_NoGenerators(), seed=3, log=log):
        picked = np.random.choice([5, 6, 7])
        u = random.random()
        with pytest.raises(UnsupportedDraw, match="numpy.random.beta"):
            np.random.beta(1.0, 2.0)
    assert (np.random.choice, random.random) == (choice, rand)
    assert [k for k, *_ in log.draws] == [KIND_CODE["choice"], KIND_CODE["random"]]
    assert picked == [5, 6, 7][int(log.draws[0][3])] and u == log.draws[1][3]
    again = RowLog()
    with recording(_NoGenerators(), seed=3, log=again):
        assert np.random.choice([5, 6, 7]) == picked  # replayable from the seed


def test_module_level_draws_during_a_reset_come_from_its_seed() -> None:
    with module_draws(11):
        first = (np.random.rand(), random.randint(0, 10**9))
    with module_draws(11):
        assert (np.random.rand(), random.randint(0, 10**9)) == first
    with module_draws(12):
        assert (np.random.rand(), random.randint(0, 10**9)) != first
        assert np.random.permutation(4).shape == (4,)  # not recordable, but a reset may use it


def test_frozenlake_port_passes_l2_and_l3_under_the_tape() -> None:
    report = _verify(load_spec(FROZENLAKE_SPEC), FROZENLAKE_PORT.parent, [2, 3])
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert report.levels[0].stats["draws_accounted"] > 0
    assert report.levels[1].stats["draws_accounted"] > 0


@pytest.mark.slow
def test_frozenlake_port_passes_l0_to_l3_at_full_scale() -> None:
    report = verify(load_spec(FROZENLAKE_SPEC), FROZENLAKE_PORT.parent, [0, 1, 2, 3])
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]


def test_slip_probability_one_quarter_fails_l1_naming_field_and_draw(tmp_path: Path) -> None:
    broken = apply_patch(
        FROZENLAKE_PORT,
        tmp_path,
        ("FAIL_RATE = (1.0 - SUCCESS_RATE) / 2.0", "FAIL_RATE = 1.0 / 4.0"),
    )
    level = _verify(load_spec(FROZENLAKE_SPEC), broken.path, [1]).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check == "step.mismatch"
    assert "s" in finding.fields
    assert "#0 random() on [0, 1)" in finding.message and "frozen_lake.py:326" in finding.message


def test_a_port_drawing_an_extra_number_is_an_rng_tape_finding(tmp_path: Path) -> None:
    broken = apply_patch(
        FROZENLAKE_PORT,
        tmp_path,
        (
            "    u, draws = draws.random()\n",
            "    u, draws = draws.random()\n    _, draws = draws.integers(0, 4)\n",
        ),
    )
    finding = _verify(load_spec(FROZENLAKE_SPEC), broken.path, [1]).levels[0].findings[0]
    assert finding.check == "rng.tape"
    assert "draw #1" in finding.message and "integers[0, 4)" in finding.message
    assert finding.extra["draw"]["reference_count"] == 1
    assert finding.extra["draw"]["port_count"] == 2
    assert finding.port_lines[0].line in broken.lines


def test_undeclared_draws_inside_step_are_refused_with_what_to_declare(tmp_path: Path) -> None:
    text = FROZENLAKE_SPEC.read_text().replace('step = "tape"\n', "")
    (tmp_path / "env.toml").write_text(text)
    spec = load_spec(tmp_path / "env.toml")
    assert spec.rng.step == "none"
    level = _verify(spec, FROZENLAKE_PORT.parent, [0]).levels[0]
    assert level.status == "error"
    message = level.findings[0].message
    assert "draws random numbers inside step" in message
    assert 'step = "tape"' in message and 'step = "distribution"' in message


def test_l4_episodes_draw_afresh_on_every_step() -> None:
    """Driver.step seeds a row's draws from its state and action: L4's evaluation must not, or
    every episode from the same start under a deterministic policy plays out the same way."""
    from envforge.backends.gymnasium import GymnasiumDriver
    from envforge.train.evaluate import run_episodes

    spec = load_spec(FROZENLAKE_SPEC)
    driver = GymnasiumDriver(spec, env_id=spec.reference.split(":", 1)[1])
    stats = run_episodes(driver, spec, lambda obs: np.full(len(obs), 2), np.zeros(32, np.uint32))
    assert len(set(stats.lengths.tolist())) > 1  # the same start, the same actions, other slips
