"""A Mutant: one small semantic change to one source file, kept as the whole mutated text.

Edits are made on the source text (never by re-printing a syntax tree), so comments and layout
survive, and they preserve the file's line count: a mutant's ``line`` is the same line in the
original and in the mutated file, which is what localization is judged against.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Replace bytes ``start:end`` of the UTF-8 source by ``text``."""

    operator: str
    start: int
    end: int
    text: str
    description: str


@dataclass(frozen=True)
class Mutant:
    id: str
    operator: str
    """arith | compare | constant | off_by_one | sign | clip | where | field_swap | rng | ..."""
    file: str
    """Path of the mutated file, relative to the implementation's directory."""
    line: int
    description: str
    source: str
    """The whole mutated file."""

    def diff(self, original: str, context: int = 1) -> str:
        return "".join(
            difflib.unified_diff(
                original.splitlines(keepends=True),
                self.source.splitlines(keepends=True),
                fromfile=f"a/{self.file}",
                tofile=f"b/{self.file}",
                n=context,
            )
        )


class SourceText:
    """A source file as UTF-8 bytes, addressed by absolute byte offsets (as ``ast`` columns are)."""

    def __init__(self, source: str) -> None:
        self.text = source
        self.data = source.encode()
        self.line_starts = [0]
        for i, byte in enumerate(self.data):
            if byte == 0x0A:
                self.line_starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        """(1-based line, 0-based byte column) -> absolute byte offset."""
        return self.line_starts[line - 1] + col

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def segment(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def apply(self, edit: Edit) -> str:
        """The mutated source. A multi-line span replaced by one line is padded with newlines
        inside parentheses, so every later line keeps its number (legal in Python, C and Rust
        expressions)."""
        text = edit.text
        lost = self.data.count(b"\n", edit.start, edit.end) - text.count("\n")
        if lost > 0:
            text = "(" + text + "\n" * lost + ")"
        return (self.data[: edit.start] + text.encode() + self.data[edit.end :]).decode()
