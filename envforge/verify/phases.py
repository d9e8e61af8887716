"""Which lines belong to the reset and which to the step: a step finding's lines come from
code the step runs, a reset finding's from code the reset runs.

Functions are found by their headers (``def``, a C function, ``fn``), with their bodies, and
linked by the names they call; the roots are those named ``reset``/``*_reset`` and
``step``/``*_step``. A line in a function only one root reaches belongs to that phase; lines at
file level (constants) and in functions both or neither reach belong to both.
"""

from __future__ import annotations

import re
from pathlib import Path

from envforge.verify.findings import SourceLocation
from envforge.verify.localize import C_FUNC, RUST_FN, source_lines
from envforge.verify.observe_lines import braced, function_body

_PY_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(")
_NAME_BEFORE_PAREN = re.compile(r"(\w+)\s*\(")
_CALL = re.compile(r"(?<![\w])([A-Za-z_]\w*)\s*\(")
PHASES = ("reset", "step")


def _functions(path: Path) -> dict[str, tuple[int, list[int]]]:
    """name -> (0-based header line, body lines) of each function defined in ``path``."""
    lines = source_lines(str(path), path.stat().st_mtime) if path.is_file() else ()
    out: dict[str, tuple[int, list[int]]] = {}
    for i, text in enumerate(lines):
        if braced(path):
            if not (C_FUNC.match(text) or RUST_FN.match(text)) or text.rstrip().endswith(";"):
                continue
            head = re.sub(r"^.*?\bfn\s+", "", text) if RUST_FN.match(text) else text
            names = _NAME_BEFORE_PAREN.findall(head)
            name = names[0] if names else None
        else:
            match = _PY_DEF.match(text)
            name = match.group(1) if match else None
        if name and name not in out:
            out[name] = (i, function_body(lines, i, braced(path)))
    return out


def _is_root(name: str, phase: str) -> bool:
    return name == phase or name.endswith("_" + phase)


class Phases:
    """The functions of a set of files reached from each phase's roots."""

    def __init__(self, files: list[Path]) -> None:
        self.where: dict[tuple[str, int], str] = {}  # (file, 0-based line) -> function
        calls: dict[str, set[str]] = {}
        for path in files:
            lines = source_lines(str(path), path.stat().st_mtime) if path.is_file() else ()
            for name, (header, body) in _functions(path).items():
                for j in [header, *body]:
                    self.where.setdefault((str(path), j), name)
                text = " ".join(lines[j] for j in body)
                calls.setdefault(name, set()).update(_CALL.findall(text))
        self.reached = {phase: self._reach(calls, phase) for phase in PHASES}

    @staticmethod
    def _reach(calls: dict[str, set[str]], phase: str) -> set[str]:
        pending = [name for name in calls if _is_root(name, phase)]
        seen = set(pending)
        while pending:
            for callee in calls.get(pending.pop(), ()):
                if callee in calls and callee not in seen:
                    seen.add(callee)
                    pending.append(callee)
        return seen

    def only_other(self, loc: SourceLocation, phase: str) -> bool:
        """Whether ``loc`` is in code only the other phase runs."""
        function = self.where.get((loc.file, loc.line - 1))
        if function is None:
            return False
        other = PHASES[1 - PHASES.index(phase)]
        return function in self.reached[other] and function not in self.reached[phase]


def in_phase(
    locs: list[SourceLocation], files: list[Path], phase: str | None
) -> list[SourceLocation]:
    """``locs`` without those only the other phase runs (all of them if none would be left)."""
    if phase is None or not locs:
        return locs
    phases = Phases(files)
    kept = [loc for loc in locs if not phases.only_other(loc, phase)]
    return kept or locs
