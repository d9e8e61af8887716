"""benchmarks/gpu/run.sh at its tiny size on the CPU, so the GPU run cannot rot before a device
is lent: every part runs (or says why not), the JSON and Markdown are written, and the run
imports nothing a GPU machine with only JAX, optax and hypothesis lacks beyond the wheels it
carries (benchmarks/gpu/requirements.txt). Never how fast anything is."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MACHINE_HAS = ("jax", "jaxlib", "optax", "flax", "hypothesis")
"""What the GPU machine has installed, with their own dependencies."""
IF_PRESENT = {"pillow", "cffi", "pycparser", "charset-normalizer"}
"""Imported under MuJoCo only where installed (glfw's cffi; trimesh's image and encoding
support): the run in a virtualenv holding JAX, optax, hypothesis and the carried wheels alone
did without them."""


def with_dependencies(names: list[str]) -> set[str]:
    """The installed distributions ``names`` need, themselves included (extras left out)."""
    seen: set[str] = set()
    todo = [n.lower().replace("_", "-") for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for req in requires:
            if "extra ==" not in req:
                todo.append(
                    re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
                )
    return seen


def carried() -> list[str]:
    lines = (ROOT / "benchmarks" / "gpu" / "requirements.txt").read_text().splitlines()
    return [line.split("==")[0] for line in lines if line and not line.startswith("#")]


def run_gpu_script(tmp_path: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ENVFORGE_GPU_WHEELS": str(tmp_path / "none")}
    out = tmp_path / "out"
    command = [str(ROOT / "benchmarks" / "gpu" / "run.sh"), "--tiny", "--out", str(out), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads((out / "gpu-run.json").read_text())
    report["markdown"] = (out / "gpu-run.md").read_text()
    return report


def check_imports(report: dict[str, Any]) -> None:
    allowed = with_dependencies([*MACHINE_HAS, *carried()]) | IF_PRESENT
    owners = metadata.packages_distributions()
    for module in report["imported"]:
        dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
        assert not dists or dists & allowed, f"{module} ({dists}) is neither there nor carried"


def check_ppo(part: dict[str, Any]) -> None:
    for row in part["port"]:
        assert row["steps_per_s"] > 0 and sum(row["share"].values()) == pytest.approx(1, abs=1e-3)
    assert part["reference"]["steps_per_s"] > 0 and part["speedup"] > 0


def test_the_gpu_run_runs_at_its_tiny_size(tmp_path: Path) -> None:
    report = run_gpu_script(tmp_path, "--skip", "halfcheetah", "--skip", "ppo_cartpole")
    assert report["size"] == "tiny" and report["machine"]["backend"] == "cpu"
    (row,) = report["parts"]["pong"]["rows"]
    assert row["steps_per_s"] > 0 and row["of_paper"] == pytest.approx(row["steps_per_s"] / 275e6)
    check_ppo(report["parts"]["ppo_pong"])
    assert report["parts"]["halfcheetah"] == {"skipped": "--skip"}
    text = report["markdown"]
    assert "| part | size | steps/s | beside | note |" in text
    assert (
        "| pong JAX, random actions | 8 envs |" in text and "| PPO pong, fused JAX port |" in text
    )
    assert "| halfcheetah | - | - | - | --skip |" in text
    check_imports(report)


@pytest.mark.slow  # MJX compiles for minutes on 2 CPU cores
def test_the_gpu_run_runs_every_part(tmp_path: Path) -> None:
    report = run_gpu_script(tmp_path)
    check_ppo(report["parts"]["ppo_cartpole"])
    cheetah = report["parts"]["halfcheetah"]
    assert cheetah["mujoco_steps_per_s"] > 0 and cheetah["mjx"][0]["steps_per_s"] > 0
    assert "| HalfCheetah MJX (float32) | 2 envs |" in report["markdown"]
    check_imports(report)


def test_a_part_that_cannot_run_says_why() -> None:
    from envforge.backends.jax import load_module

    gpu = load_module(ROOT / "benchmarks" / "gpu" / "gpu_bench.py")
    assert gpu.run_part("late", lambda: [], deadline=0.0)["skipped"].startswith("the run's time")
    failed = gpu.run_part("broken", lambda: 1 / 0, deadline=float("inf"))
    assert failed["error"] == "ZeroDivisionError: division by zero"
