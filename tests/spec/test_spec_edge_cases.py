"""Specs that are legal but awkward: a ``valid`` rule that almost no drawn
state satisfies is bad input (one line, exit 2, the --json report still printed), and
``tape_size`` bounds a tape only: in distribution mode nothing is replayed, so a reference may
draw as many numbers in a step as it likes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import PONG_PORT, PONG_SPEC, ROOT

from envforge.backends.recipe import build_driver, reference_recipe
from envforge.errors import ContractViolation
from envforge.spec import EnvSpec, spec_for_name


def test_a_valid_rule_no_drawn_state_meets_is_one_line_and_exit_2(tmp_path: Path) -> None:
    shutil.copy(PONG_SPEC.parent / "pong.c", tmp_path / "pong.c")
    spec = PONG_SPEC.read_text()
    (tmp_path / "env.toml").write_text('valid = "ball_x < -1000"\n' + spec)
    result = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "verify", "--ref", str(tmp_path / "pong.c")]
        + ["--port", str(PONG_PORT.parent), "--levels", "1", "--json", "--sandbox", "none"],
        cwd=ROOT,
        env=dict(os.environ, COLUMNS="200"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    # a fresh cache also prints "spec self-check passed" first; the error is one line, the last
    lines = result.stderr.strip().splitlines()
    [line] = [each for each in lines if each.startswith("envforge:")]
    assert line == lines[-1], lines
    assert line.startswith("envforge: error: ") and "valid predicate" in line, line
    report = json.loads(result.stdout)  # the report is printed before the error line
    [level] = report["levels"]
    assert level["status"] == "error" and level["findings"][0]["check"] == "spec"


def _with_rng(spec: EnvSpec, step: str, tape_size: int) -> EnvSpec:
    rng = spec.rng.model_copy(update={"step": step, "tape_size": tape_size})
    return spec.model_copy(update={"rng": rng})


def test_tape_size_bounds_only_a_tape() -> None:
    """uno's first step from a reset draws up to 4 numbers: with a 2-number tape that is a
    contract problem in tape mode, and nothing at all in distribution mode."""
    uno = spec_for_name("uno")
    rng = np.random.default_rng(0)
    seeds = np.arange(64, dtype=np.uint32)
    distribution = build_driver(reference_recipe(_with_rng(uno, "distribution", 2)))
    state = distribution.reset(seeds)
    actions = uno.action.sample(rng, 64)
    stepped = distribution.step(state, actions)
    assert stepped.reward.shape == (64,)
    tape = build_driver(reference_recipe(_with_rng(uno, "tape", 2)))
    with pytest.raises(ContractViolation, match="tape_size"):
        tape.step(tape.reset(seeds), actions)
