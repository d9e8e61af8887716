"""Mutation operators for randomness inside step: a probability changed, a draw skipped, two
draws taken in the other order, a drawn index counted from the wrong end."""

from __future__ import annotations

from collections import Counter

import numpy as np
from conftest import ROOT

from envforge.mutate.ast_ops import python_edits
from envforge.mutate.mutant import SourceText

TOY = """def step(state, draws):
    u, draws = draws.random()
    x = u * 2
    k, draws = draws.choice(13)
    card = DECK[k]
    return x + card + 1.0 / 3.0, draws
"""


def _applied(operator: str) -> list[str]:
    text = SourceText(TOY)
    return [text.apply(e) for e in python_edits(TOY, {}) if e.operator == operator]


def test_draw_operators_on_a_toy_step() -> None:
    (swapped,) = _applied("draw_swap")
    lines = swapped.splitlines()
    assert lines[1].strip() == "k, draws = draws.choice(13)"  # the later draw moved up
    assert lines[2].strip() == "u, draws = draws.random()"
    assert len(lines) == len(TOY.splitlines())  # line numbers kept for localization
    skipped = _applied("draw_skip")
    assert any("u, draws = (0.5, draws)" in s for s in skipped)
    assert any("k, draws = (0, draws)" in s for s in skipped)
    assert _applied("wrong_end") == [TOY.replace("DECK[k]", "DECK[-1 - k]")]
    assert TOY.replace("1.0 / 3.0", "1.0 / (3.0 + 1)") in _applied("probability")


def test_no_swap_where_the_later_draw_depends_on_the_earlier() -> None:
    dependent = TOY.replace("draws.choice(13)", "draws.choice(13, when=x > 1)")
    assert not [e for e in python_edits(dependent, {}) if e.operator == "draw_swap"]


def test_the_stochastic_ports_get_draw_mutants() -> None:
    counts: Counter[str] = Counter()
    for env in ("frozenlake", "taxi", "blackjack"):
        source = (ROOT / "generated" / env / "jax" / f"{env}.py").read_text()
        counts.update(e.operator for e in python_edits(source, {}))
    # one per draw site: frozenlake 1, taxi 6 (2 in step, 4 in reset), blackjack 3 (2 in step,
    # 1 in reset); the training resets draw through the speed layer's draws
    assert counts["draw_skip"] == 10
    assert counts["wrong_end"] == 3  # blackjack's three DECK[index]
    assert counts["probability"] >= 3  # 1/3 (frozenlake), 0.8 and 0.3 (taxi)


def test_differential_replays_the_originals_draws_to_a_tape_port_mutant(tmp_path) -> None:  # noqa: ANN001
    """A mutant that only changes the port's own training generator is no difference under the
    tape; one that skips a draw is, in ``s`` (one step from the same states)."""
    import numpy as np
    from conftest import apply_patch

    from envforge.backends.jax import JaxDriver
    from envforge.mutate.differential import Differential, DifferentialResult
    from envforge.spec import load_spec

    spec = load_spec(ROOT / "references" / "frozenlake" / "env.toml")
    port = ROOT / "generated" / "frozenlake" / "jax" / "frozenlake.py"
    original = JaxDriver(spec, port)
    state = {"s": np.arange(64, dtype=np.int32), "time": np.zeros(64, np.int32)}
    actions = np.arange(64, dtype=np.int32) % 4
    for name, edit, differs in (
        ("key", ("PRNGKey(s.astype(jnp.uint32))", "PRNGKey(s.astype(jnp.uint32) + 1)"), False),
        ("skip", ("u, draws = draws.random()", "u, draws = (0.5, draws)"), True),
    ):
        mutant = JaxDriver(spec, apply_patch(port, tmp_path / name, edit).path)
        result = DifferentialResult(effort="test")
        Differential(original, mutant).step(state, actions, result, "sampled state")
        assert (result.rows_differing > 0) is differs, name
        if differs:
            assert "s" in result.differing or "draws" in result.differing


def test_the_differential_caps_actions_per_state_but_takes_every_action() -> None:
    """UNO's 61 actions: each sampled state is stepped under 8 distinct actions (4 when stepped
    alone), rotated so that every action is still taken; few actions are all taken."""
    from types import SimpleNamespace

    from envforge.mutate.differential import Differential
    from envforge.spec import load_spec

    uno = SimpleNamespace(spec=load_spec(ROOT / "references" / "uno" / "env.toml"))
    many = Differential(uno, uno)  # type: ignore[arg-type]
    batches = many._actions(512)
    assert len(batches) == 8
    per_state = np.stack(batches, axis=1)
    assert all(len(set(row)) == 8 for row in per_state.tolist())
    assert set(per_state.ravel().tolist()) == set(range(61))
    assert len(many._actions(64, 4)) == 4
    pong = SimpleNamespace(spec=load_spec(ROOT / "references" / "pong" / "env.toml"))
    few = Differential(pong, pong)  # type: ignore[arg-type]
    assert [b.tolist() for b in few._actions(3)] == [[0] * 3, [1] * 3, [2] * 3]


RUST_TOY = """fn reset<D: Draws>(s: &mut S, draws: &mut D) {
    let cell = draws.integers(0, 25) as i32;
    let pass_loc = draws.integers(0, 4) as i32;
    let dest = (pass_loc + draws.integers(1, 4) as i32) % 4;
    draws.shuffle(&mut s.deck);
    s.card = DECK[draws.choice(DECK.len())];
    if draws.random() < 0.3 && cell > dest {
        s.x = 1.0 / 3.0;
    }
}
"""


def _rust_applied(operator: str) -> list[str]:
    from envforge.mutate.text_ops import text_edits

    text = SourceText(RUST_TOY)
    return [text.apply(e) for e in text_edits(RUST_TOY, {}, rust=True) if e.operator == operator]


def test_rust_ports_get_the_draw_operators() -> None:
    """A Rust port's draws through `Draws` are skipped, swapped and counted from the wrong end
    as a JAX port's are; the `if` of Rust, written without parentheses, is negated."""
    skipped = _rust_applied("draw_skip")
    assert len(skipped) == 6  # every draw call, the shuffle too
    assert RUST_TOY.replace("draws.integers(0, 25)", "(0)") in skipped
    assert RUST_TOY.replace("draws.shuffle(&mut s.deck)", "(())") in skipped
    assert RUST_TOY.replace("draws.random()", "(0.5)") in skipped
    swapped = [s.splitlines() for s in _rust_applied("draw_swap")]
    assert len(swapped) == 3  # not the destination before pass_loc: it reads pass_loc
    assert swapped[0][1].strip().startswith("let pass_loc")
    assert swapped[0][2].strip().startswith("let cell")
    toy = RUST_TOY.splitlines()
    assert swapped[1][3:5] == [toy[4], toy[3]]  # the shuffle before the destination
    assert swapped[2][4:6] == [toy[5], toy[4]]  # the card before the shuffle
    assert _rust_applied("wrong_end") == [
        RUST_TOY.replace("DECK[draws.choice(", "DECK[(DECK.len()) - 1 - draws.choice(")
    ]
    probability = _rust_applied("probability")
    assert RUST_TOY.replace("< 0.3", "< 0.7") in probability
    assert RUST_TOY.replace("1.0 / 3.0", "1.0 / (3.0 + 1.0)") in probability
    branch = _rust_applied("branch")
    assert RUST_TOY.replace("if draws.random() < 0.3 && cell > dest", "if false") in branch
    negated = "if !(draws.random() < 0.3 && cell > dest)"
    assert RUST_TOY.replace("if draws.random() < 0.3 && cell > dest", negated) in branch


def test_rust_branch_leaves_if_let_and_match_guards() -> None:
    from envforge.mutate.text_ops import text_edits

    source = "fn f(x: Option<i32>) -> i32 {\n    if let Some(v) = x { return v; }\n    match x {\n        Some(v) if v > 0 => { v }\n        _ => 0,\n    }\n}\n"
    assert not [e for e in text_edits(source, {}, rust=True) if e.operator == "branch"]


def test_the_stochastic_rust_ports_get_draw_mutants() -> None:
    from envforge.mutate.text_ops import text_edits

    counts: Counter[str] = Counter()
    for env in ("blackjack", "taxi", "frozenlake", "leduc", "uno"):
        source = (ROOT / "generated" / env / "rust" / "src" / f"{env}.rs").read_text()
        counts.update(e.operator for e in text_edits(source, {}, rust=True))
    assert counts["draw_skip"] == 16  # blackjack 1, taxi 6, frozenlake 1, leduc 3, uno 5
    assert counts["wrong_end"] == 5 and counts["draw_swap"] == 2
    assert counts["probability"] >= 3  # taxi's 0.8 and 0.3, frozenlake's 1/3


def test_a_rust_tuple_field_is_no_float_literal() -> None:
    """`columns[0].1` took `.1` for a float (blackjack-rust's stillborn `constant:285:1`)."""
    from envforge.mutate.text_ops import text_edits

    source = "fn f(c: &[(u8, usize)], p: (f32, f32)) -> f32 {\n    c[0].1 as f32 + p.0 * 0.5\n}\n"
    constants = [e.text for e in text_edits(source, {}, rust=True) if e.operator == "constant"]
    assert constants == ["0.55"]
