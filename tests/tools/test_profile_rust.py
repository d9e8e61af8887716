"""``envforge profile <env> --target rust``: time by EnvBatch method, and by function where the
machine has perf (the output says which was used)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envforge.bench.profile_rust import run_profile_rust
from envforge.spec_lookup import spec_for_name

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
