"""benchmarks/train_speed.py: PPO on an env's best port against PPO on its
reference, side by side, and the "Training speed (PPO)" table docs/BENCHMARKS.md renders from
its JSON. Run at a tiny size: these check that the script measures both sides and writes what
the docs render, never how fast anything is (speed is only ever printed by benchmarks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from envforge.backends.jax import load_module
from envforge.bench.train_table import load_results, met_target, training_section

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--updates", "1", "--ref-updates", "2", "--num-envs", "2", "--num-steps", "4"]


def script() -> ModuleType:
    return load_module(ROOT / "benchmarks" / "train_speed.py")


def check_result(result: dict[str, Any], env: str, target: str) -> None:
    port, ref = result["port"], result["reference_side"]
    assert (result["env"], result["target"], result["ppo"]["num_envs"]) == (env, target, 2)
    assert port["env_steps"] == 1 * 2 * 4 and ref["env_steps"] == 2 * 2 * 4
    for side in (port, ref):
        assert side["steps_per_s"] > 0 and side["steps_per_cpu_s"] > 0 and side["train_s"] > 0
    assert result["speedup"] == round(port["steps_per_s"] / ref["steps_per_s"], 2)
    wall, per_cpu = result["speedup"], result["speedup_per_cpu_s"]
    assert result["met"] == (min(wall, per_cpu) >= result["target_x"])
    assert result["machine"]["cpu"] and result["machine"]["cores"] >= 1
    for side in (port, ref):  # where the training time went, adding up to all of it
        split = side["split"]
        assert sum(split["share"].values()) == pytest.approx(1.0, abs=1e-3)
        assert split["seconds"]["env"] > 0 and split["seconds"]["policy"] > 0
        # one host-loop update is the compiling one, which is not timed
        assert split["seconds"]["update"] > 0 or split["updates"] == 1
        if split["how"] == "timed in the run":
            assert sum(split["seconds"].values()) == pytest.approx(side["train_s"], abs=0.01)
        else:  # the fused run's phases, timed alone, beside its own time
            assert split["fused_s"] == pytest.approx(side["train_s"], abs=0.01)


def test_train_speed_measures_a_rust_port_and_its_reference(tmp_path: Path) -> None:
    assert script().main(["--env", "blackjack:rust", *TINY, "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "train-blackjack-2x4.json").read_text())
    check_result(result, "blackjack", "rust")
    assert result["port"]["trainer"] == result["reference_side"]["trainer"] == "host loop"
    assert result["target_x"] == 10.0  # the target for an env the network may dominate
    section = training_section(load_results(tmp_path))
    assert section.startswith("## Training speed (PPO)")
    assert "| blackjack | rust port, host loop |" in section


@pytest.mark.slow  # the fused trainer's compilation: ~30 s on a loaded 2-core machine
def test_train_speed_trains_a_jax_port_fused(tmp_path: Path) -> None:
    assert script().main(["--env", "cartpole", *TINY, "--no-rollout", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "train-cartpole-2x4.json").read_text())
    check_result(result, "cartpole", "jax")
    assert result["port"]["trainer"] == "fused JAX" and result["target_x"] == 50.0


def test_a_target_is_met_only_by_both_ratios() -> None:
    # on a loaded machine the wall ratio can pass while the per-CPU-second one does not
    result = {"speedup": 16.5, "speedup_per_cpu_s": 4.6, "target_x": 10.0}
    assert not met_target(result)
    assert met_target({**result, "speedup_per_cpu_s": 10.0})


def test_benchmarks_md_renders_the_training_table(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/regenerate_docs.py"), "--envs", "pong"]
        + ["--from-json", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    text = out.read_text()
    assert "## Training speed (PPO)" in text  # from the committed docs/bench/train-*.json
    training = text.split("## Training speed (PPO)")[1]
    results = load_results(ROOT / "docs" / "bench")
    for result in results:
        assert f"| {result['env']} | " in training
        assert f"`python {result['command']}`" in training  # the command that measures it again
    dates = sorted(r["date"] for r in results)
    assert f"Measured {dates[0]}" in training and dates[-1] in training
