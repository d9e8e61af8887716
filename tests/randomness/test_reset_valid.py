"""A random reset is compared with the reference's field by field; the spec's ``valid`` rule
catches a reset that is right field by field and wrong jointly (envforge/verify/reset_valid.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import ROOT, apply_patch

from envforge.backends.jax import JaxDriver
from envforge.mutate.differential import Differential, DifferentialResult
from envforge.spec import load_spec
from envforge.verify import reset_valid
from envforge.verify.context import VerifyContext, VerifyOptions

UNO = ROOT / "references" / "uno"
UNO_PORT = ROOT / "generated" / "uno" / "jax"


def test_a_port_reset_the_valid_rule_rejects_is_a_finding_naming_what_the_rule_reads() -> None:
    spec = load_spec(UNO / "env.toml")
    port = JaxDriver(spec, UNO_PORT)
    seeds = np.arange(64, dtype=np.uint32)
    ref = port.reset(seeds)
    ctx = VerifyContext(spec, port, port, VerifyOptions(isolate=False, sandbox=None))
    assert reset_valid.check(ctx, seeds, ref, ref) is None
    broken = {k: v.copy() for k, v in ref.items()}
    plain = np.flatnonzero(broken["target"] % 15 < 13)  # not wild: the colour is the card's own
    broken["target_color"][plain[0]] = (broken["target_color"][plain[0]] + 1) % 4
    finding = reset_valid.check(ctx, seeds, ref, broken)
    assert finding is not None and finding.check == "reset.valid"
    assert (
        f"at 1 of 64 seeds (first seed {plain[0]}, which breaks `((target % 15" in finding.message
    )
    assert finding.fields == ["target", "target_color"]  # the clause it breaks reads these


def test_the_rules_top_level_terms_are_split_outside_brackets() -> None:
    assert reset_valid.clauses("(a[..., 0] >= 0) & (b & c)\n& d") == [
        "(a[..., 0] >= 0)",
        "(b & c)",
        "d",
    ]


def test_the_differential_tells_a_jointly_wrong_reset_apart(tmp_path: Path) -> None:
    spec = load_spec(UNO / "env.toml")
    original = JaxDriver(spec, UNO_PORT)
    colour = "    chosen = jnp.where(trait(top) == WILD, jax.random.randint(pick, (), 0, 4), color(top))\n"
    mutant = JaxDriver(
        spec,
        apply_patch(
            UNO_PORT / "uno.py",
            tmp_path,
            (colour, "    chosen = jax.random.randint(pick, (), 0, 4)\n"),
        ).path,
    )
    result = DifferentialResult(effort="resets")
    Differential(original, mutant, 0).resets(256, result)
    assert set(result.differing) == {"target", "target_color"}
    assert result.witness["where"] == "reset breaks the spec's valid rule"
