"""docs/THIRD_PARTY.md's example, run: a third-party-style JAX library that owns its RNG
(``tests/third_party/lakejax``, a stand-in written for this test) wrapped by the adapter
``tests/ports/frozenlake_thirdparty/frozenlake.py`` verifies in distribution mode against
gymnasium's FrozenLake-v1, and the page shows that adapter as it is."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

DOC = ROOT / "docs" / "THIRD_PARTY.md"
PORT_DIR = ROOT / "tests" / "ports" / "frozenlake_thirdparty"
LIBRARY = ROOT / "tests" / "third_party"


def test_the_page_shows_the_adapter_and_the_spec_it_describes() -> None:
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks == [(PORT_DIR / "frozenlake.py").read_text()]
    spec = load_spec(PORT_DIR / "env.toml")
    assert spec.rng.step == "distribution" and spec.rng.mode == "sync"
    assert spec.port["jax"] == "tests/ports/frozenlake_thirdparty"
    assert "--spec tests/ports/frozenlake_thirdparty/env.toml" in text


def test_the_third_party_port_verifies_in_distribution_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """L0 and L1 at --scale 0.3 (the page's command, in-process): equivalent."""
    monkeypatch.syspath_prepend(str(LIBRARY))
    monkeypatch.delitem(sys.modules, "lakejax", raising=False)
    options = VerifyOptions(isolate=False, sandbox=None, scale=0.3)
    report = verify(load_spec(PORT_DIR / "env.toml"), PORT_DIR, [0, 1], options)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    stats = report.levels[1].stats
    assert stats["distribution_tests"] > 0 and stats["coverage_steering"]


@pytest.mark.slow
def test_a_library_that_slips_one_way_less_often_fails_l1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same adapter over a library whose slip is 1/4 left, 1/2 ahead, 1/4 right: caught
    at default scale, naming the cell ``s``."""
    broken = apply_patch(
        LIBRARY / "lakejax" / "__init__.py",
        tmp_path / "lib" / "lakejax",
        (
            "        slip = jax.random.choice(key, jnp.array([-1, 0, 1]))\n",
            "        slip = jax.random.choice(key, jnp.array([-1, 0, 0, 1]))\n",
        ),
    )
    monkeypatch.syspath_prepend(str(broken.path.parent.parent))
    monkeypatch.delitem(sys.modules, "lakejax", raising=False)  # not the unbroken one
    options = VerifyOptions(isolate=False, sandbox=None)
    level = verify(load_spec(PORT_DIR / "env.toml"), PORT_DIR, [1], options).levels[0]
    assert level.status == "fail", level.summary
    assert level.findings[0].fields == ["s"], level.findings[0].message
