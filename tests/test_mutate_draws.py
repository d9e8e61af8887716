"""Mutation operators for randomness inside step: a probability changed, a draw skipped, two
draws taken in the other order, a drawn index counted from the wrong end."""

from __future__ import annotations

from collections import Counter

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
    assert counts["draw_skip"] == 5  # one per draw site: frozenlake 1, taxi 2, blackjack 2
    assert counts["wrong_end"] == 2  # blackjack's two DECK[index]
    assert counts["probability"] >= 3  # 1/3 (frozenlake), 0.8 and 0.3 (taxi)
