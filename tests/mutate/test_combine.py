"""``mutate --combine``: K mutants of one file merged line by line, combinations whose lines keep
apart, and a component named when a group shows its line."""

from __future__ import annotations

from envforge.mutate.combine import Combination, CombineReport, combinations, merged, shown_lines
from envforge.mutate.mutant import Mutant

ORIGINAL = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"


def _mutant(line: int, new: str) -> Mutant:
    lines = ORIGINAL.splitlines(keepends=True)
    lines[line - 1] = new + "\n"
    return Mutant(f"constant:{line}:1", "constant", "m.py", line, new, "".join(lines))


def test_mutants_merge_line_by_line_and_combinations_keep_apart() -> None:
    a, c, d = _mutant(1, "a = 9"), _mutant(3, "c = 9"), _mutant(4, "d = 9")
    both = merged(ORIGINAL, [a, c])
    assert both.source == "a = 9\nb = 2\nc = 9\nd = 4\ne = 5\n"
    assert both.id == "constant:1:1+constant:3:1" and both.line == 1
    combos = combinations([a, c, d], ORIGINAL, 2, 10, seed=0)
    # c and d are neighbours: never together; a pairs with each
    pairs = sorted(tuple(p.id for p in parts) for parts, _ in combos)
    assert pairs == [("constant:1:1", "constant:3:1"), ("constant:1:1", "constant:4:1")]
    assert combinations([a, c, d], ORIGINAL, 3, 10, seed=0) == []


def test_a_component_is_named_by_a_shown_port_line() -> None:
    report = {
        "levels": [
            {"findings": [{"port_lines": [{"file": "/tmp/x/m.py", "line": 3}]}]},
            {
                "findings": [
                    {"port_lines": [{"file": "/tmp/x/m.py", "line": n} for n in range(20, 40)]}
                ]
            },
        ]
    }
    shown = shown_lines(report)
    assert ("m.py", 3) in shown and ("m.py", 29) in shown and ("m.py", 30) not in shown
    done = CombineReport(
        "pong", 2, [Combination(["x", "y"], [1, 3], [True, True], 2, "not equivalent", 1.0)]
    )
    half = Combination(["x", "z"], [1, 5], [True, False], 1, "not equivalent", 1.0)
    done.combinations.append(half)
    assert done.share == 0.5
    assert "x named, z NOT named" in "\n".join(done.lines())
