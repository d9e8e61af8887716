"""L0 checks a port's own auto-reset (a Rust batch's `reset_where`, which `envforge.make` and
`envforge bench` step with): the done rows reset as `reset` of their seeds, the others left.

A Rust FrozenLake whose `reset_where` ignores `done` (it resets every env) had been called
equivalent by a mutation campaign: nothing in L0-L3 calls `reset_where`. Now L0 fails on it
naming the field; the shipped port passes the same check.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, apply_patch

from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

LAKE = ROOT / "generated" / "frozenlake" / "rust"
QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None)
HAS_MATURIN = shutil.which("maturin") or (Path(sys.executable).parent / "maturin").exists()
needs_rust = pytest.mark.skipif(
    shutil.which("cargo") is None or not HAS_MATURIN, reason="needs cargo and maturin"
)


@needs_rust
def test_the_shipped_port_resets_exactly_the_done_rows() -> None:
    level0 = verify(spec_for_name("frozenlake"), LAKE, [0], QUICK).levels[0]
    assert level0.status == "pass", level0.summary


@pytest.mark.slow
@needs_rust
def test_an_auto_reset_that_ignores_done_fails_l0(tmp_path: Path) -> None:
    crate = tmp_path / "rust"
    shutil.copytree(LAKE, crate, ignore=shutil.ignore_patterns("target"))
    apply_patch(
        LAKE / "src" / "lib.rs",
        crate / "src",
        (
            "                        if done[k] {\n",
            "                        if done[k] || true {\n",
        ),
    )
    level0 = verify(spec_for_name("frozenlake"), crate, [0], QUICK).levels[0]
    assert level0.status == "fail"
    finding = next(f for f in level0.findings if f.check == "contract.reset_where")
    assert "should be left as it was" in finding.message
    assert "s" in finding.fields
