"""Mutation operators only Rust sources get: `if` conditions written without parentheses, and
the randomness a port takes through the RNG tape's `Draws` (`src/draws.rs`), as the Python
operators `draw_skip`, `draw_swap`, `wrong_end` and `probability` do for JAX ports.

Every pattern runs on the comment-free text (``code``, the same length as the source), so the
offsets it finds are the source's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from envforge.mutate.mutant import Edit

Make = Callable[[str, int, int, str, str], Edit]
"""``(operator, start, end, new text, description) -> Edit`` on character offsets."""

SKIPPED = {
    "random": "0.5",
    "uniform": "0.5",
    "normal": "0.5",
    "integers": "0",
    "choice": "0",
    "choice_weighted": "0",
    "shuffle": "()",
}
"""A draw method of `Draws` and what a skipped draw leaves (the shuffle leaves the order)."""

_DRAW = re.compile(r"(?<![\w.])(\w*draws?\w*)\s*\.\s*(" + "|".join(SKIPPED) + r")\s*\(")
_IF = re.compile(r"(?<![\w.])if\s+(?!let\b)")
_PROBABILITY = re.compile(r"(?<![\w.])(0\.\d+)(_?f32|_?f64)?(?![\w.])")
_FRACTION = re.compile(r"(?<![\w.])(\d+\.\d*) / (\d+\.\d*)(?![\w.])")
_LET = re.compile(r"^\s*let\s+(?:mut\s+)?([^=:]+)")


def close_of(code: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return None


def draw_calls(code: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, method, argument text) of each ``draws.<method>(...)`` call."""
    for m in _DRAW.finditer(code):
        close = close_of(code, m.end() - 1)
        if close is not None:
            yield m.start(), close + 1, m.group(2), code[m.end() : close]


def branches(code: str, text: str, make: Make) -> Iterator[Edit]:
    """``if c {`` to ``if !(c) {`` and ``if false {`` (not ``if let``, not a match guard)."""
    for m in _IF.finditer(code):
        depth, i = 0, m.end()
        while i < len(code) and not (depth == 0 and code[i] in "{;"):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(code[i], 0)
            i += 1
        cond = text[m.end() : i].rstrip()
        if i == len(code) or code[i] != "{" or "=>" in cond or not cond:
            continue
        end = m.end() + len(cond)
        yield make("branch", m.end(), end, f"!({cond})", "`if` condition negated")
        yield make("branch", m.end(), end, "false", "`if` branch dropped")


def draw_edits(code: str, text: str, make: Make) -> Iterator[Edit]:
    calls = list(draw_calls(code))
    for start, end, method, _ in calls:
        new = SKIPPED[method]
        yield make("draw_skip", start, end, f"({new})", f"`{text[start:end]}` skipped")
    for start, end, method, arg in calls:
        before = code[:start].rstrip()
        after = code[end:].lstrip()
        if method == "choice" and before.endswith("[") and after.startswith("]"):
            n = arg.strip()
            new = f"({n}) - 1 - {text[start:end]}"
            yield make("wrong_end", start, end, new, f"`[{text[start:end]}]` -> `[{new}]`")
    yield from _swaps(code, text, calls, make)


def _swaps(
    code: str, text: str, calls: list[tuple[int, int, str, str]], make: Make
) -> Iterator[Edit]:
    """Two adjacent one-line statements that each make one draw, in the other order, where
    the later one does not read a name the earlier one binds (Taxi's destination, drawn
    relative to the passenger's drawn location, has none)."""
    pairs = [(code.rfind("\n", 0, call[0]) + 1, call) for call in calls]
    for (a, first), (b, second) in zip(pairs, pairs[1:], strict=False):
        a_end, b_end = code.find("\n", a), code.find("\n", b)
        if a_end + 1 != b or b_end < 0:
            continue
        line_a, line_b = code[a:a_end], code[b:b_end]
        if not (line_a.rstrip().endswith(";") and line_b.rstrip().endswith(";")):
            continue
        if sum(1 for s, *_ in calls if a <= s < b_end) != 2 or _indent(line_a) != _indent(line_b):
            continue
        bound = _LET.match(line_a)
        names = set(re.findall(r"\w+", bound.group(1))) - {"mut"} if bound else set()
        if any(re.search(rf"\b{re.escape(n)}\b", line_b) for n in names):
            continue
        new = text[b:b_end] + "\n" + text[a:a_end]
        what = f"draws `{text[first[0] : first[1]]}` and `{text[second[0] : second[1]]}` in the other order"
        yield make("draw_swap", a, b_end, new, what)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def probability_edits(code: str, text: str, make: Make) -> Iterator[Edit]:
    """A float literal in (0, 1) (not 0.5) to its complement; ``a / b`` (a < b) to ``a / (b + 1)``."""
    for m in _PROBABILITY.finditer(code):
        value = float(m.group(1))
        if 0.0 < value < 1.0 and value != 0.5:
            new = f"{1.0 - value!r}{m.group(2) or ''}"
            yield make("probability", m.start(), m.end(), new, f"`{m.group(0)}` -> `{new}`")
    for m in _FRACTION.finditer(code):
        a, b = float(m.group(1)), float(m.group(2))
        if 0 < a < b:
            new = f"({m.group(2)} + 1.0)"
            what = f"`{m.group(0)}` -> `{m.group(1)} / {new}`"
            yield make("probability", m.start(2), m.end(2), new, what)


def rust_edits(code: str, text: str, make: Make) -> Iterator[Edit]:
    yield from branches(code, text, make)
    yield from draw_edits(code, text, make)
    yield from probability_edits(code, text, make)
