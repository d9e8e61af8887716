"""C references draw inside ``step`` through envforge's draw hook (``native/c_draws.py``).

``references/pig`` (the dice game Pig, C) rolls every die through ``pig_draw``; the C driver
records each draw (kind, parameters, value, the reference's line) as the tape its JAX port
replays. Broken ports are exact patches of the shipped port (``conftest.apply_patch``); the
verifications run in this process at a small scale.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.backends.c import CDriver
from envforge.bench.c_loop import build_harness
from envforge.bench.measure import BenchSettings
from envforge.errors import BadInput, ContractViolation
from envforge.rng.draws import KIND_CODE
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

PIG_SPEC = ROOT / "references" / "pig" / "env.toml"
PIG_C = ROOT / "references" / "pig" / "pig.c"
PIG_PORT = ROOT / "generated" / "pig" / "jax" / "pig.py"
QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None)


def _line_of(text: str, path: Path = PIG_C) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _pig() -> CDriver:
    spec = load_spec(PIG_SPEC)
    return CDriver(spec, spec.root / spec.reference)


def test_the_c_reference_records_each_draw_with_its_kind_range_and_line() -> None:
    driver = _pig()
    state = driver.reset(np.zeros(64, np.uint32))
    hold = np.ones(64, np.int32)  # the opponent plays its whole turn: greed, then its rolls
    tr, log = driver.step_draws(state, hold, np.arange(64, dtype=np.uint64), None)
    assert (log.count >= 2).all() and (log.count <= 15).all()
    assert (log.kind[:, 0] == KIND_CODE["random"]).all()
    rolls = np.arange(log.size)[None, :] < log.count[:, None]
    rolls[:, 0] = False
    assert (log.kind[rolls] == KIND_CODE["integers"]).all()
    assert (log.a[rolls] == 1).all() and (log.b[rolls] == 7).all()
    assert set(log.value[rolls]) <= {1, 2, 3, 4, 5, 6} and len(set(log.value[rolls])) == 6
    greed = f"{PIG_C.resolve()}:{_line_of('pig_draw(draws, DRAW_RANDOM, 0, 1)')}"
    opponent_roll = f"{PIG_C.resolve()}:{_line_of('int32_t die = ROLL(draws);')}"
    assert log.site_of(0, 0) == greed and log.site_of(0, 1) == opponent_roll
    # what the draws made: the opponent banks the sum of its rolls unless it rolled a 1
    for i in range(64):
        values = log.value[i, 1 : log.count[i]]
        expected = 0 if values[-1] == 1 else values.sum()
        assert tr.state["opp"][i] == expected
    # the same seeds draw the same numbers; other seeds other ones
    again, log2 = driver.step_draws(state, hold, np.arange(64, dtype=np.uint64), None)
    assert (log2.value == log.value).all() and (again.state["opp"] == tr.state["opp"]).all()
    _, other = driver.step_draws(state, hold, np.arange(64, dtype=np.uint64) + 1000, None)
    assert (other.value != log.value).any()


def test_replaying_a_tape_through_the_hook_gives_the_taped_transition() -> None:
    """What a C port does under verification: its draws are the tape's values (clamped into
    the range it asked), whatever its own seeds say."""
    driver = _pig()
    state = driver.reset(np.zeros(32, np.uint32))
    actions = np.arange(32, dtype=np.int32) % 2
    recorded, log = driver.step_draws(state, actions, np.arange(32, dtype=np.uint64), None)
    replayed, log2 = driver.step_hooked(
        driver.structs_of(state), actions, np.arange(32, dtype=np.uint64) + 7, log
    )
    for name in recorded.state:
        assert (replayed.state[name] == recorded.state[name]).all(), name
    assert (log2.value == log.value).all() and (log2.count == log.count).all()
    # the driver of a C port takes the tape through step_draws; a reference's ignores it
    driver.side = "port"
    as_port, _ = driver.step_draws(state, actions, np.arange(32, dtype=np.uint64) + 7, log)
    assert all((as_port.state[k] == recorded.state[k]).all() for k in recorded.state)
    driver.side = "reference"
    own, _ = driver.step_draws(state, actions, np.arange(32, dtype=np.uint64) + 7, log)
    assert any((own.state[k] != recorded.state[k]).any() for k in recorded.state)
    log.value[:, :] = 9.0  # outside [1, 7) and [0, 1): every draw clamps to its top
    clamped, log3 = driver.step_hooked(
        driver.structs_of(state), actions, np.arange(32, dtype=np.uint64), log
    )
    rolled = actions == 0
    assert (clamped.state["last"][rolled] == 6).all()
    assert (log3.value[log3.kind == KIND_CODE["integers"]] == 6).all()


def _c_reference(tmp_path: Path, draw: str) -> CDriver:
    """Pig with its agent's roll replaced by ``draw``."""
    source = PIG_C.read_text().replace(
        "        int32_t die = ROLL(draws);\n        env->last = die;",
        f"        int32_t die = (int32_t)({draw});\n        env->last = die;",
    )
    assert draw in source
    tmp_path.mkdir()
    (tmp_path / "pig.c").write_text(source)
    (tmp_path / "env.toml").write_text(PIG_SPEC.read_text())
    spec = load_spec(tmp_path / "env.toml")
    return CDriver(spec, tmp_path / "pig.c")


def test_a_draw_the_hook_cannot_make_is_refused(tmp_path: Path) -> None:
    state = {k: np.zeros(4, np.int32) for k in ("me", "opp", "turn", "last", "steps")}
    weighted = _c_reference(tmp_path / "weighted", "pig_draw(draws, 4, 6, 3.5)")
    with pytest.raises(ContractViolation, match="weighted choice"):
        weighted.step(state, np.zeros(4, np.int32))
    unknown = _c_reference(tmp_path / "unknown", "pig_draw(draws, 9, 1, 7)")
    with pytest.raises(ContractViolation, match="unknown kind"):
        unknown.step(state, np.zeros(4, np.int32))


def test_a_port_rolling_the_wrong_range_is_an_rng_tape_finding_naming_both_lines(
    tmp_path: Path,
) -> None:
    broken = apply_patch(
        PIG_PORT,
        tmp_path,
        (
            "    die, draws = draws.integers(1, 7, when=rolls)\n",
            "    die, draws = draws.integers(1, 6, when=rolls)\n",
        ),
    )
    level = verify(load_spec(PIG_SPEC), broken.path, [1], QUICK).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check == "rng.tape"
    assert re.search(
        r"draw #0 at step 0: the reference asked integers\[1, 7\), the port "
        r"asked integers\[1, 6\)",
        finding.message,
    ), finding.message
    assert finding.port_lines[0].line in broken.lines
    assert Path(finding.port_lines[0].file).name == "pig.py"
    assert any(
        Path(loc.file).name == "pig.c" and "ROLL(draws)" in loc.text
        for loc in finding.reference_lines
    ), finding.reference_lines


@pytest.mark.slow
def test_the_pig_port_is_equivalent_through_the_hook_at_l0_to_l3() -> None:
    report = verify(load_spec(PIG_SPEC), PIG_PORT.parent, [0, 1, 2, 3], QUICK)
    assert report.passed, [f.message for f in report.findings]
    assert "reference draws replayed and accounted for" in report.levels[1].summary


@pytest.mark.slow
def test_an_opponent_that_keeps_its_total_on_a_one_fails_naming_opp_and_the_rolls(
    tmp_path: Path,
) -> None:
    """The same draws, another transition: a step finding on ``opp`` listing the rolls."""
    broken = apply_patch(
        PIG_PORT,
        tmp_path,
        (
            "jnp.where(going, jnp.where(die == 1, 0, total + die), total)",
            "jnp.where(going, jnp.where(die == 1, total, total + die), total)",
        ),
    )
    level = verify(load_spec(PIG_SPEC), broken.path, [1], QUICK).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check == "step.mismatch" and "opp" in finding.fields, finding.message
    assert "integers[1, 7) = 1" in finding.message


def test_the_bench_harness_rolls_the_dice_from_each_envs_own_generator() -> None:
    """``envforge bench`` steps a C reference in a C loop: under the hook each env draws from
    its own generator (nothing logged)."""
    spec = load_spec(PIG_SPEC)
    exe, _ = build_harness(spec, PIG_C, BenchSettings())
    assert "envforge_draws_seed(&draws[i], (uint64_t)i)" in exe.with_suffix(".c").read_text()
    proc = subprocess.run([str(exe), "16", "1", "0.01", "0"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    steps, wall, _ = proc.stdout.split()
    assert int(steps) >= 16 and float(wall) > 0
    assert float(proc.stderr.split()[-1]) != 0.0  # games ended (the sum of their rewards)


def test_a_c_reference_that_draws_under_a_spec_without_step_draws_is_one_error_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "pig.c").write_text(PIG_C.read_text())
    (tmp_path / "env.toml").write_text(PIG_SPEC.read_text().replace('step = "tape"', ""))
    spec = load_spec(tmp_path / "env.toml")
    with pytest.raises(BadInput, match='pig_draw but its spec has \\[rng\\] step = "none"'):
        CDriver(spec, tmp_path / "pig.c")
