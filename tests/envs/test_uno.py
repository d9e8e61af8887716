"""UNO (rlcard) against rlcard's random agent: variable-size lists as padded canonical arrays,
drawn states that rlcard can step from, the reshuffle and the random agent's choices on the RNG
tape, the shipped JAX port passing, and broken ports failing at L1 naming the element or the
draw.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.rng.draws import KIND_CODE
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.strategies import sample_states

pytest.importorskip("rlcard")

SPEC = ROOT / "references" / "uno" / "env.toml"
PORT = ROOT / "generated" / "uno" / "jax" / "uno.py"
QUICK = VerifyOptions(scale=0.02, isolate=False, sandbox=None)
R5, G7, B3 = 5, 22, 33  # card ids: 15 * colour + trait
DRAW = 60


def _adapter() -> Any:
    spec = importlib.util.spec_from_file_location("uno_adapter", SPEC.parent / "uno.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(**fields: Any) -> dict[str, np.ndarray]:
    """One canonical state as a batch of one: lists padded with -1."""
    out = {}
    for name in ("deck", "played"):
        row = np.full(108, -1, np.int32)
        row[: len(fields[name])] = fields[name]
        out[name] = row[None]
    hands = np.full((2, 108), -1, np.int32)
    for p, hand in enumerate(fields["hands"]):
        hands[p, : len(hand)] = hand
    out["hands"] = hands[None]
    for name in ("target", "target_color", "direction"):
        out[name] = np.asarray([fields[name]], np.int32)
    return out


def test_sampled_states_are_valid_padded_per_hand_and_within_the_deck() -> None:
    spec = load_spec(SPEC)
    states = sample_states(spec, np.random.default_rng(0), 120)
    assert spec.valid_mask(states).all()
    adapter = _adapter()
    for b in range(120):
        held = np.zeros(60, np.int64)
        for lst in (states["deck"][b], states["played"][b], *states["hands"][b]):
            n = int(np.sum(lst >= 0))
            assert (lst[:n] >= 0).all() and (lst[n:] == -1).all()  # items, then the sentinel
            np.add.at(held, lst[:n], 1)
        assert (held <= adapter.COPIES).all()
    sizes = (states["hands"] >= 0).sum(axis=-1)
    assert sizes.min() >= 1 and sizes.max() >= 10  # hands of many sizes, none empty
    assert len(np.unique(sizes[:, 0])) > 5


def test_reference_resets_and_steps_with_rlcards_legal_actions() -> None:
    uno = _adapter().UnoVsRandom()
    obs, _ = uno.reset(seed=3)
    again, _ = uno.reset(seed=3)
    np.testing.assert_array_equal(obs, again)
    assert obs.shape == (301,) and obs[:240].reshape(4, 4, 15)[3].sum() == 1  # one target
    legal = sorted(uno.env._get_legal_actions())
    assert np.flatnonzero(obs[240:]).tolist() == legal
    hands = uno.hands
    assert (hands >= 0).sum(axis=1).tolist() == [len(p.hand) for p in uno.game.players]
    _, reward, over, truncated, _ = uno.step(legal[0])
    assert not truncated and (over or reward == 0.0)


def test_an_illegal_action_is_a_random_legal_one_drawn_on_the_tape() -> None:
    """rlcard 1.2.0's own decoding raises on an illegal id; the adapter plays a random legal
    one with np.random.choice, which the tape records as choice(number of legal ids)."""
    from envforge.backends.python import PythonDriver

    spec = load_spec(SPEC)
    driver = PythonDriver(spec, str(SPEC.parent / "uno.py") + ":UnoVsRandom")
    # the agent holds red 5 and green 2 on a green 7: only g-2 (id 17) is legal
    state = _row(
        deck=list(range(30, 50)), played=[G7], hands=[[R5, 17], [B3]],
        target=G7, target_color=1, direction=1,
    )  # fmt: skip
    tr, log = driver.step_draws(state, np.array([R5]), np.array([11], np.uint32), None)
    assert log.kind[0, 0] == KIND_CODE["choice"] and log.a[0, 0] == 1  # one legal id
    assert tr.state["hands"][0, 0, 0] == R5 and tr.state["hands"][0, 0, 1] == -1  # g-2 played


def test_a_reshuffle_inside_step_goes_on_the_tape() -> None:
    """An empty deck: the agent's draw shuffles the played cards back (rlcard's RandomState,
    reached through the adapter's forwarder) with one integers(0, i + 1) per card, from the
    end."""
    from envforge.backends.python import PythonDriver

    spec = load_spec(SPEC)
    driver = PythonDriver(spec, str(SPEC.parent / "uno.py") + ":UnoVsRandom")
    played = list(range(30, 50))  # blue and yellow cards
    state = _row(deck=[], played=played, hands=[[R5], [B3]], target=G7, target_color=1, direction=1)
    assert spec.valid_mask(state).all()
    tr, log = driver.step_draws(state, np.array([DRAW]), np.array([5], np.uint32), None)
    assert (log.kind[0, :19] == KIND_CODE["integers"]).all()
    assert log.b[0, :19].tolist() == list(range(20, 1, -1))
    after = tr.state
    cards = [after["deck"][0], after["played"][0], *after["hands"][0]]
    assert sorted(int(c) for lst in cards for c in lst if c >= 0) == sorted([*played, R5, B3])


def test_port_replays_the_references_draws_to_the_same_transitions() -> None:
    """The port's step_with_draws, handed the reference's recorded draws, from a reshuffle
    state and an illegal action's state: the same state, observation and number of draws."""
    import jax
    import jax.numpy as jnp

    from envforge.backends.jax import load_module
    from envforge.backends.python import PythonDriver
    from envforge.rng.jax_draws import Draws

    spec = load_spec(SPEC)
    driver = PythonDriver(spec, str(SPEC.parent / "uno.py") + ":UnoVsRandom")
    port = load_module(PORT)
    step = jax.jit(port.step_with_draws)
    cases = [
        (_row(deck=[], played=list(range(30, 50)), hands=[[R5], [B3]], target=G7,
              target_color=1, direction=1), DRAW),
        (_row(deck=list(range(30, 50)), played=[G7], hands=[[R5, 17], [B3]], target=G7,
              target_color=1, direction=1), R5),
    ]  # fmt: skip
    for state, action in cases:
        for seed in range(3):
            tr, log = driver.step_draws(state, np.array([action]), np.array([seed]), None)
            start = port.from_canonical({k: v[0] for k, v in state.items()})
            tape = Draws.from_tape(jnp.asarray(log.value[0]))
            new, obs, reward, over, _, drawn = step(start, jnp.int32(action), tape)
            assert int(drawn.drawn) == int(log.count[0])
            for name, value in port.to_canonical(new).items():
                np.testing.assert_array_equal(np.asarray(value), tr.state[name][0], err_msg=name)
            np.testing.assert_array_equal(np.asarray(obs), tr.obs[0])
            assert float(reward) == tr.reward[0] and bool(over) == tr.terminated[0]


@pytest.mark.slow
def test_port_passes_l1_under_the_tape() -> None:
    report = verify(load_spec(SPEC), PORT.parent, [1], QUICK)
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert report.levels[0].stats["draws_accounted"] > 0


@pytest.mark.slow
def test_drawing_from_the_bottom_of_the_deck_fails_l1_naming_the_element(tmp_path: Path) -> None:
    broken = apply_patch(
        PORT,
        tmp_path,
        (
            "    drawn, deck, draws = _deal_one(drew.deck, drew.n_deck, draws, is_draw)\n",
            "    drawn, deck = drew.deck[0], _remove(drew.deck, 0)\n",
        ),
    )
    level = verify(load_spec(SPEC), broken.path, [1], QUICK).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check.startswith("step.")
    elements = finding.extra["elements"]  # the message names them: "(first at hands[0][2])"
    assert any(e.startswith(("deck[", "hands[", "played[", "target")) for e in elements)


@pytest.mark.slow
def test_opponent_choosing_among_all_actions_is_an_rng_tape_finding(tmp_path: Path) -> None:
    broken = apply_patch(PORT, tmp_path, ("d.choice(n, when=~first)", "d.choice(61, when=~first)"))
    finding = verify(load_spec(SPEC), broken.path, [1], QUICK).levels[0].findings[0]
    assert finding.check == "rng.tape"
    assert "the port asked choice of 61" in finding.message


@pytest.mark.slow
def test_port_passes_l0_to_l3_at_full_scale() -> None:
    report = verify(load_spec(SPEC), PORT.parent, [0, 1, 2, 3])
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
