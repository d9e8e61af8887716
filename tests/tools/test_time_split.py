"""Where PPO's training time goes: the host loop's laps add up to its training time, the fused
trainer's phases are each timed, and `envforge train --time-split` and the PPO table report
both sides. Tiny sizes: these check the accounting, never how fast anything is."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_ppo import POINT_PORT, POINT_SPEC

from envforge.backends.jax import JaxDriver
from envforge.bench.train_table import split_cell, training_row
from envforge.train.config import PPOConfig
from envforge.train.host_ppo import train_host
from envforge.train.port_env import load_port
from envforge.train.time_split import PHASES, Laps, TimeSplit, fused_split
from envforge.train.vec_env import DriverVecEnv

ROOT = Path(__file__).resolve().parents[2]
TINY = PPOConfig(total_timesteps=3 * 2 * 4, num_envs=2, num_steps=4, num_minibatches=2)


def test_laps_charge_every_moment_to_one_phase() -> None:
    start = time.perf_counter()
    laps = Laps()
    time.sleep(0.01)
    laps.lap("env")
    time.sleep(0.02)
    assert laps.lap("compile") >= 0.02  # not training: kept out of the split
    laps.lap("update")
    elapsed = time.perf_counter() - start
    seconds = laps.split.seconds
    assert set(seconds) == set(PHASES) and seconds["env"] >= 0.01
    assert laps.split.total_s <= elapsed - 0.02
    assert math.isclose(sum(laps.split.share(p) for p in PHASES), 1.0)


@pytest.mark.slow  # ~12 CPU-s; the default suite checks the same sums through train_speed.py
def test_host_loop_split_adds_up_to_its_training_time() -> None:
    vec = DriverVecEnv(JaxDriver(POINT_SPEC, POINT_PORT), POINT_SPEC, TINY.num_envs)
    result = train_host(vec, POINT_SPEC, TINY)
    split = result.extra["split"]
    assert split.updates == TINY.num_updates == 3
    assert all(split.seconds[p] > 0 for p in ("env", "policy", "update", "other"))
    # laps of one clock: the phases are the training time, to the clock reads around them
    assert abs(split.total_s - result.train_s) < 0.005 + 0.01 * result.train_s
    assert split.seconds["update"] == pytest.approx(result.extra["learn_s"])


@pytest.mark.slow  # ~12 CPU-s; the default suite's GPU-run test reports a fused split too
def test_fused_split_times_each_phase_at_the_runs_shapes() -> None:
    module = load_port(POINT_PORT, "point")
    split = fused_split(module, POINT_SPEC, TINY, seeds=2, fused_s_per_update=0.5, repeats=1)
    assert split.updates == 1 and split.fused_s == 0.5 and split.seconds["other"] == 0.0
    assert all(split.seconds[p] > 0 for p in ("env", "policy", "update"))
    over = split.over(TINY.num_updates)
    assert over.updates == 3 and over.fused_s == pytest.approx(1.5)
    assert over.total_s == pytest.approx(3 * split.total_s)
    assert over.share("env") == pytest.approx(split.share("env"))
    assert set(split.as_dict()["share"]) == set(PHASES)


def test_the_ppo_table_shows_each_sides_split() -> None:
    port = TimeSplit({"env": 1.0, "policy": 1.0, "update": 8.0, "other": 0.0}, 2).as_dict()
    ref = TimeSplit({"env": 7.0, "policy": 2.0, "update": 0.5, "other": 0.5}, 2).as_dict()
    assert split_cell({"split": port}) == "10% / 10% / 80%"
    assert split_cell({}) == "-"  # a result measured before the split existed
    result = json.loads((ROOT / "docs" / "bench" / "train-pong.json").read_text())
    result["port"]["split"], result["reference_side"]["split"] = port, ref
    assert "| 10% / 10% / 80% | 70% / 20% / 5% |" in training_row(result)


def test_one_reference_update_is_refused_before_training() -> None:
    args = [sys.executable, "-m", "envforge.cli", "train", "--time-split"]
    args += ["--port", str(ROOT / "generated" / "cartpole" / "jax"), "--reference-updates", "1"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "envforge: error: --reference-updates: expected >= 2" in done.stderr


@pytest.mark.slow  # the fused trainer and its three phases compile: ~1-2 min on a loaded machine
def test_train_command_reports_the_split_on_port_and_reference(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "envforge.cli", "train"]
    args += ["--port", str(ROOT / "generated" / "cartpole" / "jax"), "--timesteps", "512"]
    args += ["--seeds", "1", "--eval-episodes", "0", "--out", str(tmp_path / "p.npz")]
    args += ["--time-split", "--reference-updates", "2", "--json"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    port, ref = summary["time_split"]["port"], summary["time_split"]["reference"]
    assert port["how"].startswith("phases") and ref["how"] == "timed in the run"
    for split in (port, ref):
        assert sum(split["share"].values()) == pytest.approx(1.0, abs=1e-3)
        assert split["seconds"]["env"] > 0 and split["seconds"]["update"] > 0
    assert port["fused_s"] > 0 and summary["reference_steps_per_second"] > 0
