"""Plain words where the numbers alone mislead (verify/plain.py): a float64 expected value a
float32 port cannot hold, a few ulps, a count off by one, a flipped sign; and nothing said
where the values show none of these."""

from __future__ import annotations

import numpy as np

from envforge.verify.findings import Finding
from envforge.verify.plain import explain, explain_all
from envforge.verify.verdict import render_finding


def test_a_float64_value_a_float32_port_cannot_hold_is_said_so() -> None:
    expected, actual = np.float64(0.8846875), np.float32(0.8846875)
    [said] = explain("reward", expected, actual)
    assert "the expected 0.8846875 is not representable in float32" in said
    assert f"the nearest float32 is {float(np.float32(0.8846875))!r}, which the port has" in said
    # a port a few ulps from that nearest value: both are said
    off = np.nextafter(np.float32(0.8846875), np.float32(1.0))
    texts = explain("reward", expected, off)
    assert "not representable in float32" in texts[0] and "the port has" in texts[0]
    assert texts[1] == "reward: 1 ulp apart in float32 (rounding)"
    # the same float32 value widened to float64 by the driver
    [said] = explain("reward", expected, np.float64(np.float32(0.8846875)))
    assert "not representable in float32, and the port has its nearest float32" in said


def test_ulps_off_by_one_and_sign() -> None:
    a = np.float32(1.5)
    assert explain("x", a, np.nextafter(np.nextafter(a, np.float32(2)), np.float32(2))) == [
        "x: 2 ulps apart in float32 (rounding)"
    ]
    assert explain("score", np.int32(5), np.int32(6)) == [
        "score: off by one (the port has one more: 6 for 5)"
    ]
    assert explain("vx", np.float32(0.125), np.float32(-0.125)) == [
        "vx: the sign is flipped (-0.125 for 0.125)"
    ]
    assert explain_all({"obs": np.float32([0.1, 0.125])}, {"obs": np.float32([0.1, -0.125])}) == [
        "obs[1]: the sign is flipped (-0.125 for 0.125)"
    ]
    # nothing misleading here: a plain wrong value, a flag
    assert explain("x", np.float32(1.0), np.float32(3.0)) == []
    assert explain("terminated", np.bool_(True), np.bool_(False)) == []
    assert explain("score", np.int32(5), np.int32(9)) == []


def test_the_report_shows_them() -> None:
    finding = Finding(1, "step.mismatch", "differs in reward", extra={"explanations": ["a\x1b"]})
    assert "  in plain words: a\\x1b" in render_finding(finding)
