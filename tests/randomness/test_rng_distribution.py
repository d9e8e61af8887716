"""Distribution mode: from fixed states, many samples a side, a two-sample test per output.

FrozenLake's spec is switched to ``[rng] step = "distribution"`` (two tested states, the
default 2000 samples a side): the shipped port passes L1, one whose slips have probability 1/4
instead of 1/3 fails it with a chi-square test on ``s``, its p-value and the counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, apply_patch

from envforge.spec import EnvSpec, load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.stats import chi2_power

FROZENLAKE = ROOT / "references" / "frozenlake" / "env.toml"
PORT = ROOT / "generated" / "frozenlake" / "jax" / "frozenlake.py"
OPTIONS = VerifyOptions(isolate=False, sandbox=None)


def _distribution_spec(tmp_path: Path) -> EnvSpec:
    text = FROZENLAKE.read_text().replace('step = "tape"', 'step = "distribution"\nstates = 2')
    text += "\n[verify]\nreset_samples = 200\n"
    (tmp_path / "env.toml").write_text(text)
    return load_spec(tmp_path / "env.toml")


def test_power_grows_with_samples_and_effect() -> None:
    assert chi2_power(2000, 1e-4, 2, 0.18) > 0.9 > chi2_power(500, 1e-4, 2, 0.18)
    assert chi2_power(2000, 1e-4, 2, 0.05) < 0.1


@pytest.mark.slow
def test_distribution_mode_passes_the_port_and_fails_slip_one_quarter(tmp_path: Path) -> None:
    spec = _distribution_spec(tmp_path)
    good = verify(spec, PORT.parent, [1], OPTIONS).levels[0]
    assert good.status == "pass", good.summary
    assert good.stats["samples_per_side"] == 2000 and good.stats["distribution_tests"] > 0
    broken = apply_patch(
        PORT, tmp_path, ("FAIL_RATE = (1.0 - SUCCESS_RATE) / 2.0", "FAIL_RATE = 1.0 / 4.0")
    )
    level = verify(spec, broken.path, [1], OPTIONS).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check == "step.distribution"
    assert finding.fields == ["s"] or finding.extra["element"] == "obs"
    # the spec's samples, twice as many at a witness of a rare branch or event
    samples = 4000 if "witness of a rare" in finding.message else 2000
    assert "chi-square" in finding.message and f"{samples} samples a side" in finding.message
    assert finding.error["p_value"] < level.stats["alpha_per_test"]
    assert sum(finding.expected[finding.extra["element"]]["counts"].values()) == samples
