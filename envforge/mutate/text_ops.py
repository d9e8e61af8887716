"""Mutation operators for C and Rust sources, found with patterns on the comment-free text.

Comments and string literals are blanked (same length) before matching, so offsets stay valid
and nothing inside them is mutated; ``#include`` lines are skipped. Binary operators are only
taken when written with a space on both sides (the house style of our references), which keeps
pointer ``*``, unary ``-`` and ``->`` out of the arithmetic swaps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from envforge.mutate.mutant import Edit, SourceText
from envforge.mutate.rust_ops import rust_edits

ARITH = {"+": "-", "-": "+", "*": "/", "/": "*", "<<": ">>", ">>": "<<", "&": "|", "|": "&"}
COMPARE = {
    "<": ("<=", ">="),
    "<=": ("<", ">"),
    ">": (">=", "<="),
    ">=": (">", "<"),
    "==": ("!=",),
    "!=": ("==",),
}
LOGIC = {"&&": "||", "||": "&&"}
CLIP_CALLS = ("clampf", "clamp", "fminf", "fmaxf", "fmin", "fmax", "min", "max")
RNG_WORDS = ("rng", "random", "uniform")

_BINARY = re.compile(r"(?<=\s)(<<|>>|[+\-*/&|])(=?)(?=\s)")
_COMPARE = re.compile(r"(?<=\s)(<=|>=|==|!=|<|>)(?=\s)")
_LOGIC = re.compile(r"(?<=\s)(&&|\|\|)(?=\s)")
# not a tuple field (`columns[0].1`, `pair().0`)
_FLOAT = re.compile(
    r"(?<![\w.)\]])((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?)(f|F|_?f32|_?f64)?(?![\w.])"
)
_INT = re.compile(r"(?<![\w.])(\d+)([uU]|_?[ui](?:8|16|32|64|size))?(?![\w.xX])")
_UNARY_MINUS = re.compile(r"(?:(?<=[=(,?:])|(?<=[=(,?:]\s)|(?<=return\s))-(?=[\w(])")
_NOT = re.compile(r"(?<![\w)\]])!(?=[\w(])")  # not a macro call (println!)
_IF = re.compile(r"\bif\s*\(")
_CALL = re.compile(r"(?<![\w.])(\w+)\s*\(")
_DECLARED_DIM = re.compile(r"^\s*[A-Za-z_][\w\s]*\s\**\w+\s*\[$")
_MEMBER = re.compile(r"(->|\.)(\w+)\b(?!\s*\()")


def blank_comments(text: str) -> str:
    """Comments, string and char literals and #include lines replaced by spaces."""
    out = list(text)
    pattern = re.compile(
        r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|^\s*#\s*include[^\n]*', re.S | re.M
    )
    for m in pattern.finditer(text):
        for i in range(m.start(), m.end()):
            if out[i] != "\n":
                out[i] = " "
    return "".join(out)


_TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def blank_test_modules(code: str) -> str:
    """Rust ``#[cfg(test)] mod ... { }`` blocks replaced by spaces: unit tests are not in the
    built extension, so mutating them cannot change the port (``code`` has no comments)."""
    out = list(code)
    for m in _TEST_MODULE.finditer(code):
        close = matching_paren(code, m.end() - 1, "{}")
        end = len(code) if close is None else close + 1
        for i in range(m.start(), end):
            if out[i] != "\n":
                out[i] = " "
    return "".join(out)


def matching_paren(code: str, open_at: int, pair: str = "()") -> int | None:
    """Index of the bracket that closes the one at ``open_at`` (``pair``: opener, closer)."""
    opener, closer = pair[0], pair[1]
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == opener:
            depth += 1
        elif code[i] == closer:
            depth -= 1
            if depth == 0:
                return i
    return None


def split_args(inner: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level comma-separated argument in ``inner``."""
    spans, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, len(inner)))
    return spans


class TextMutator:
    def __init__(self, source: str, sibling_fields: dict[str, str], rust: bool) -> None:
        self.src = SourceText(source)
        self.text = source
        self.code = blank_comments(source)
        if rust:
            self.code = blank_test_modules(self.code)
        self.siblings = sibling_fields
        self.xor_one = "1" if rust else "1u"
        self.rust = rust

    def byte(self, i: int) -> int:
        return len(self.text[:i].encode())

    def edit(self, op: str, start: int, end: int, new: str, what: str) -> Edit:
        return Edit(op, self.byte(start), self.byte(end), new, what)

    def edits(self) -> list[Edit]:
        out: list[Edit] = []
        for gen in (self._arith, self._compare, self._literals, self._sign, self._calls):
            out.extend(gen())
        if self.rust:  # `if c {`, the draws of the RNG tape, probabilities
            out.extend(rust_edits(self.code, self.text, self.edit))
        else:
            out.extend(self._branches())
        out.extend(self._members())
        return out

    def _arith(self) -> Iterator[Edit]:
        for m in _BINARY.finditer(self.code):
            old, eq = m.group(1), m.group(2)
            yield self.edit(
                "arith", m.start(), m.end(), ARITH[old] + eq, f"`{old}{eq}` -> `{ARITH[old]}{eq}`"
            )
        for m in _LOGIC.finditer(self.code):
            yield self.edit(
                "logic",
                m.start(),
                m.end(),
                LOGIC[m.group(1)],
                f"`{m.group(1)}` -> `{LOGIC[m.group(1)]}`",
            )

    def _compare(self) -> Iterator[Edit]:
        for m in _COMPARE.finditer(self.code):
            for new in COMPARE[m.group(1)]:
                yield self.edit("compare", m.start(), m.end(), new, f"`{m.group(1)}` -> `{new}`")

    def _literals(self) -> Iterator[Edit]:
        for m in _FLOAT.finditer(self.code):
            value = float(m.group(1))
            new = value * 1.1 if value != 0.0 else 0.1
            text = f"{new!r}{m.group(2) or ''}"
            yield self.edit("constant", m.start(), m.end(), text, f"`{m.group(0)}` -> `{text}`")
        for m in _INT.finditer(self.code):
            if _FLOAT.match(self.code, m.start()) or self._in_declaration(m.start()):
                continue
            value = int(m.group(1))
            for new in (value + 1, value - 1):
                if new >= 0:
                    text = f"{new}{m.group(2) or ''}"
                    yield self.edit(
                        "off_by_one", m.start(), m.end(), text, f"`{m.group(0)}` -> `{text}`"
                    )

    def _in_declaration(self, i: int) -> bool:
        """An array size in a declaration (``float x[4];``): changing it only breaks the build."""
        line_start = self.code.rfind("\n", 0, i) + 1
        return _DECLARED_DIM.match(self.code[line_start:i]) is not None

    def _sign(self) -> Iterator[Edit]:
        for m in _UNARY_MINUS.finditer(self.code):
            yield self.edit("sign", m.start(), m.end(), "", "unary `-` dropped")
        for m in _NOT.finditer(self.code):
            yield self.edit("sign", m.start(), m.end(), "", "`!` dropped")

    def _calls(self) -> Iterator[Edit]:
        for m in _CALL.finditer(self.code):
            name = m.group(1)
            open_at = m.end() - 1
            close = matching_paren(self.code, open_at)
            if close is None or self._is_definition(close):
                continue
            inner = self.text[open_at + 1 : close]
            args = split_args(self.code[open_at + 1 : close])
            first = inner[args[0][0] : args[0][1]].strip()
            if name in CLIP_CALLS and len(args) >= 2:
                yield self.edit(
                    "clip",
                    m.start(),
                    close + 1,
                    f"({first})",
                    f"`{name}(...)` -> its first argument",
                )
            elif (
                any(w in name.lower() for w in RNG_WORDS)
                and first
                and not self._is_definition(close)
            ):
                a = open_at + 1 + args[0][0]
                b = open_at + 1 + args[0][1]
                new = f"({first} ^ {self.xor_one})"
                if first.startswith("&mut "):  # Rust: flip the generator's bit, lend it on
                    state = first[len("&mut ") :].strip()
                    new = f"{{ {state} ^= 1; &mut {state} }}"
                yield self.edit("rng", a, b, new, f"`{name}({first})` -> `{name}({new})`")

    def _is_definition(self, close: int) -> bool:
        rest = self.code[close + 1 : close + 40].lstrip()
        return rest.startswith("{") or rest.startswith("->")

    def _branches(self) -> Iterator[Edit]:
        for m in _IF.finditer(self.code):
            open_at = m.end() - 1
            close = matching_paren(self.code, open_at)
            if close is None:
                continue
            cond = self.text[open_at + 1 : close]
            yield self.edit("branch", open_at, close + 1, f"(!({cond}))", "`if` condition negated")
            yield self.edit("branch", open_at, close + 1, "(0)", "`if` branch dropped")

    def _members(self) -> Iterator[Edit]:
        for m in _MEMBER.finditer(self.code):
            name = m.group(2)
            if name in self.siblings:
                new = self.siblings[name]
                yield self.edit(
                    "field_swap",
                    m.start(2),
                    m.end(2),
                    new,
                    f"`{m.group(1)}{name}` -> `{m.group(1)}{new}`",
                )


def text_edits(source: str, sibling_fields: dict[str, str], rust: bool = False) -> list[Edit]:
    return TextMutator(source, sibling_fields, rust).edits()
