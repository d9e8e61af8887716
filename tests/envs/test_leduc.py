"""Leduc Hold'em (rlcard) against rlcard's random agent: the opponent's ``np.random.choice``
goes through the RNG tape, drawn states respect the spec's ``valid`` predicate, the shipped
JAX port passes, and ports that deal from the wrong end of the deck or let the opponent choose
among the wrong actions fail naming the element or the draw.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envforge.errors import BadInput, SpecError
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.strategies import sample_states, stack_states, state_strategy

pytest.importorskip("rlcard")

SPEC = ROOT / "references" / "leduc" / "env.toml"
PORT = ROOT / "generated" / "leduc" / "jax" / "leduc.py"
QUICK = VerifyOptions(scale=0.05, isolate=False, sandbox=None)


def _spec_with(tmp_path: Path, old: str, new: str) -> Path:
    text = SPEC.read_text()
    assert text.count(old) == 1
    (tmp_path / "env.toml").write_text(text.replace(old, new))
    (tmp_path / "leduc.py").write_text((SPEC.parent / "leduc.py").read_text())
    return tmp_path / "env.toml"


def test_sampled_states_satisfy_the_valid_predicate() -> None:
    spec = load_spec(SPEC)
    states = sample_states(spec, np.random.default_rng(0), 2000)
    assert len(states["public"]) == 2000
    assert spec.valid_mask(states).all()
    first_round = states["round_counter"] == 0
    assert first_round.any() and (states["public"][first_round] == -1).all()
    assert (states["banked"][first_round] == 0).all()


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much],  # as the verifier's L1 does
)
@given(st.data())
def test_hypothesis_states_satisfy_the_valid_predicate(data: st.DataObject) -> None:
    spec = load_spec(SPEC)
    row = data.draw(state_strategy(spec))
    assert spec.valid_mask(stack_states(spec, [row]))[0]


def test_a_valid_predicate_that_never_holds_is_one_clear_error(tmp_path: Path) -> None:
    spec = load_spec(_spec_with(tmp_path, 'valid = """\n', 'valid = """\n(banked < 0) &\n'))
    with pytest.raises(BadInput, match="valid predicate held for only 0 of"):
        sample_states(spec, np.random.default_rng(0), 10)


def test_a_valid_predicate_over_an_unknown_name_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="key 'valid'.*unknown name 'pot'"):
        load_spec(_spec_with(tmp_path, 'valid = """\n', 'valid = """\n(pot > 0) &\n'))


def test_reference_resets_deterministically_although_the_opponent_draws_globally() -> None:
    """The random agent may act first (np.random.choice at reset): the reset's seed decides."""
    from envforge.backends.python import PythonDriver

    spec = load_spec(SPEC)
    driver = PythonDriver(spec, str(SPEC.parent / "leduc.py") + ":LeducVsRandom")
    seeds = np.arange(64, dtype=np.uint32)
    a, b = driver.reset(seeds), driver.reset(seeds)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert (a["raised"][:, 0] != a["raised"][:, 1]).any()  # some resets include a first move


def test_port_passes_l1_and_l2_under_the_tape() -> None:
    report = verify(load_spec(SPEC), PORT.parent, [1, 2], QUICK)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert report.levels[0].stats["draws_accounted"] > 0


def test_public_card_from_the_wrong_end_of_the_deck_fails_l1_naming_it(tmp_path: Path) -> None:
    broken = apply_patch(
        PORT,
        tmp_path,
        ("    top_of_deck = jnp.maximum(left - 1, 0)\n", "    top_of_deck = jnp.int32(0)\n"),
    )
    level = verify(load_spec(SPEC), broken.path, [1], QUICK).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert "public" in finding.fields or "deck" in finding.fields
    assert any(e.startswith(("deck[", "public")) for e in finding.extra["elements"])
    assert any(loc.line in broken.lines for loc in finding.port_lines)


def test_opponent_choosing_among_all_four_actions_is_an_rng_tape_finding(tmp_path: Path) -> None:
    broken = apply_patch(
        PORT, tmp_path, ("draws.choice(jnp.sum(ok), when=moves)", "draws.choice(4, when=moves)")
    )
    finding = verify(load_spec(SPEC), broken.path, [1], QUICK).levels[0].findings[0]
    assert finding.check == "rng.tape"
    assert "the port asked choice of 4" in finding.message


@pytest.mark.slow
def test_port_passes_l0_to_l3_at_full_scale() -> None:
    report = verify(load_spec(SPEC), PORT.parent, [0, 1, 2, 3])
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]


@pytest.mark.slow
def test_l4_policies_trained_on_the_port_transfer_to_the_reference() -> None:
    level = verify(load_spec(SPEC), PORT.parent, [4], VerifyOptions(isolate=False)).levels[0]
    assert level.status == "pass", level.summary


@pytest.mark.parametrize("layer", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_port_resets_deal_the_openings_the_reference_keeps(layer: bool) -> None:
    """The reference deals again while the opponent folds before the agent's first action; the
    port draws from the kept deals directly: the agent the small blind 3/5 of the
    time, the opponent's opening call 1/5 and raise 1/5, never over, the 30 hand pairs
    uniform. With the speed layer on (hashed draws) and off (threefry)."""
    import jax
    import jax.numpy as jnp

    from envforge.backends.jax import load_module
    from envforge.kit import speed_layer

    port = load_module(PORT)
    with speed_layer.switched(layer):
        states = jax.jit(jax.vmap(port.reset))(jnp.arange(30_000, dtype=jnp.uint32))
        assert not np.asarray(jax.vmap(port.is_over)(states)).any()
    raised = np.asarray(states.raised)
    shares = [
        np.mean((raised[:, 0] == a) & (raised[:, 1] == b)) for a, b in ((1, 2), (2, 2), (2, 4))
    ]
    assert np.allclose(shares, [0.6, 0.2, 0.2], atol=0.015), shares
    pairs = np.unique(np.asarray(states.hands), axis=0, return_counts=True)[1]
    assert len(pairs) == 30 and pairs.min() > 800 and pairs.max() < 1200, pairs
