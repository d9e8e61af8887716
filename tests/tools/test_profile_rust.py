"""``envforge profile <env> --target rust``: time by EnvBatch method, and by function where the
machine has perf (the output says which was used); stepped with envforge bench's own loop."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envforge.bench.profile_rust import run_profile_rust
from envforge.spec import spec_for_name

ROOT = Path(__file__).resolve().parents[2]
CRATE = ROOT / "generated" / "cartpole" / "rust"


@pytest.mark.slow
def test_rust_profile_names_the_methods_and_the_ports_functions() -> None:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    profile = run_profile_rust(spec_for_name("cartpole"), CRATE, 256, None)
    methods = {row["method"]: row["share"] for row in profile["methods"]}
    assert {"step", "observe"} <= set(methods) and sum(methods.values()) == pytest.approx(1.0)
    assert profile["steps_per_s"] > 0 and profile["calls"] > 0
    if shutil.which("perf") is None:
        assert profile["sampling"] == "perf not found on the PATH" and not profile["functions"]
        return
    assert profile["sampling"].startswith("perf record"), profile["sampling"]
    # samples land in the port's own library, by its Rust function names
    ours = [row for row in profile["functions"] if row["dso"].startswith("cartpole_rust")]
    named = [row["function"] for row in ours]
    assert any("cartpole" in name for name in named), profile["functions"]


def test_rust_profile_steps_the_bench_loop_and_can_include_reset() -> None:
    """The profile had observed after every step, which bench does not (doubling observe's
    share): it now runs bench's loop, where observe follows only a step that reset an env.
    ``--include-reset`` adds a whole batch's reset per loop step as its own row."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    profile = run_profile_rust(spec_for_name("cartpole"), CRATE, 1, None, include_reset=True)
    calls = {row["method"]: row["calls"] for row in profile["methods"]}
    # batch 1, random actions: a CartPole episode lasts about 20 steps
    assert calls["step"] == profile["calls"] > 100
    assert calls["observe"] == calls["reset_where"] < calls["step"] / 4
    assert calls["reset"] == profile["calls"]
    assert "bench" in profile["loop"] and profile["include_reset"]
