"""Reference coverage: which of the reference's executable lines (and, for C, branches) a stretch
of verification executed.

``LineCoverage`` is the data (one source file, or one function's lines of it): execution count
per executable line, and for C the count of each branch outcome per line. It travels back from
the isolated reference process as a plain dataclass, adds up over levels (``merged``) and reads
as ``executed 94% of pong.c; never executed: lines 76, 103-104``. Collected with coverage.py for
Python and gymnasium references (``PythonCoverage`` below; line counts are 1 or 0 there) and with
gcc's ``--coverage`` instrumentation for C (``gcov.py``).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LineCoverage:
    file: str
    scope: str
    """``file`` (every executable line of it) or a function, e.g. ``CartPoleEnv.step``."""
    lines: dict[int, int]
    """Executable line -> times executed (coverage.py: 1 executed, 0 not)."""
    branches: dict[int, list[int]] = field(default_factory=dict)
    """Line -> times each of its branch outcomes was taken (C only)."""
    excluded: dict[int, str] = field(default_factory=dict)
    """Never-executed lines the spec excludes (``[verify] coverage_exclude``) -> why; not in
    ``lines``, so not in the percentage."""

    @property
    def name(self) -> str:
        base = Path(self.file).name
        return base if self.scope == "file" else f"{self.scope} in {base}"

    @property
    def executed(self) -> int:
        return sum(1 for count in self.lines.values() if count > 0)

    @property
    def percent(self) -> float:
        return 100.0 * self.executed / len(self.lines) if self.lines else 100.0

    def never_executed(self) -> list[int]:
        return sorted(line for line, count in self.lines.items() if count == 0)

    @property
    def branches_total(self) -> int:
        return sum(len(b) for b in self.branches.values())

    @property
    def branches_taken(self) -> int:
        return sum(1 for b in self.branches.values() for count in b if count > 0)

    def branch_lines_not_taken(self) -> list[int]:
        """Lines (themselves executed) with a branch outcome never taken."""
        return sorted(
            line
            for line, b in self.branches.items()
            if self.lines.get(line, 0) > 0 and any(count == 0 for count in b)
        )

    def merged(self, other: LineCoverage) -> LineCoverage:
        lines = dict(self.lines)
        for line, count in other.lines.items():
            lines[line] = lines.get(line, 0) + count
        branches = {line: list(b) for line, b in self.branches.items()}
        for line, b in other.branches.items():
            mine = branches.setdefault(line, [0] * len(b))
            branches[line] = [x + y for x, y in zip(mine, b, strict=False)]
        excluded = {**self.excluded, **other.excluded}
        return LineCoverage(self.file, self.scope, lines, branches, excluded)

    def excluding(self, rules: list[tuple[str, str]]) -> LineCoverage:
        """This coverage without the never-executed lines that ``rules`` (regex, why) pick in
        the source (``excluded_lines``); unchanged when the source cannot be read."""
        try:
            source = Path(self.file).read_text()
        except (OSError, UnicodeDecodeError):
            return self
        picked: dict[int, str] = {}
        for pattern, why in rules:
            for line in excluded_lines(source, pattern):
                # an exclusion excuses lines never run; a line that ran is counted as run
                if self.lines.get(line, 1) == 0:
                    picked.setdefault(line, why)
        if not picked:
            return self
        lines = {k: v for k, v in self.lines.items() if k not in picked}
        branches = {k: v for k, v in self.branches.items() if k not in picked}
        return LineCoverage(self.file, self.scope, lines, branches, {**self.excluded, **picked})

    def sentence(self, what: str) -> str:
        """``L1–L3 executed 94% of pong.c (81 of 86 lines; branches 60 of 70); never executed:
        lines 76, 103-104``."""
        text = f"{what} executed {self.percent:.0f}% of {self.name} ({self.executed} of "
        text += f"{len(self.lines)} lines"
        if self.branches:
            text += f"; branch outcomes {self.branches_taken} of {self.branches_total}"
        text += ")"
        missing = self.never_executed()
        if missing:
            text += f"; never executed: {_lines(missing)}"
        not_taken = self.branch_lines_not_taken()
        if not_taken:
            text += f"; a branch outcome never taken on {_lines(not_taken)}"
        if self.excluded:
            by_why: dict[str, list[int]] = {}
            for line, why in sorted(self.excluded.items()):
                by_why.setdefault(why, []).append(line)
            parts = [f"{_lines(lines)} ({why})" for why, lines in by_why.items()]
            text += "; excused: " + "; ".join(parts)
        return text

    def quoted(self, limit: int = 12, width: int = 120) -> list[str]:
        """The lines ``sentence`` names as never executed or with a branch outcome never taken,
        each with its text (``76 (branch outcome never taken): if (ball_y < 0) {``), at most
        ``limit`` of them; none when the source cannot be read."""
        try:
            source = Path(self.file).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            return []
        marked = [(line, "never executed") for line in self.never_executed()]
        marked += [(line, "a branch outcome never taken") for line in self.branch_lines_not_taken()]
        out = []
        for line, why in sorted(marked)[:limit]:
            text = source[line - 1].strip() if 0 < line <= len(source) else ""
            text = text if len(text) <= width else text[: width - 3] + "..."
            out.append(f"{self.name} line {line} ({why}): {text}")
        if len(marked) > limit:
            out.append(f"... and {len(marked) - limit} more lines of {self.name}")
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "scope": self.scope,
            "lines_total": len(self.lines),
            "lines_executed": self.executed,
            "percent": round(self.percent, 2),
            "never_executed": self.never_executed(),
            "line_counts": {str(k): v for k, v in sorted(self.lines.items())},
        }
        if self.excluded:
            out["excluded"] = {str(k): v for k, v in sorted(self.excluded.items())}
        if self.branches:
            out.update(
                branches_total=self.branches_total,
                branches_taken=self.branches_taken,
                branch_lines_not_taken=self.branch_lines_not_taken(),
                branch_counts={str(k): v for k, v in sorted(self.branches.items())},
            )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LineCoverage:
        return cls(
            file=data["file"],
            scope=data["scope"],
            lines={int(k): int(v) for k, v in data.get("line_counts", {}).items()},
            branches={
                int(k): [int(x) for x in v] for k, v in data.get("branch_counts", {}).items()
            },
            excluded={int(k): str(v) for k, v in data.get("excluded", {}).items()},
        )


def merge_all(parts: list[list[LineCoverage]]) -> list[LineCoverage]:
    """Coverage of several stretches (levels) together, file by file."""
    by_key: dict[tuple[str, str], LineCoverage] = {}
    for part in parts:
        for cov in part:
            key = (cov.file, cov.scope)
            by_key[key] = by_key[key].merged(cov) if key in by_key else cov
    return list(by_key.values())


def excluded_lines(source: str, pattern: str) -> set[int]:
    """Lines (1-based) picked by ``pattern`` in ``source``: where each match starts, and when
    that line opens a block (ends with ``:`` before any comment), every line of the block
    (the following lines indented deeper, blank lines included)."""
    text = source.splitlines()
    starts: list[int] = [0]
    for row in text:
        starts.append(starts[-1] + len(row) + 1)
    picked: set[int] = set()
    for m in re.finditer(pattern, source, re.MULTILINE):
        line = bisect.bisect_right(starts, m.start())  # 1-based
        picked.add(line)
        head = text[line - 1]
        if not head.split("#", 1)[0].rstrip().endswith(":"):
            continue
        indent = len(head) - len(head.lstrip())
        for k in range(line, len(text)):
            row = text[k]
            if row.strip() and len(row) - len(row.lstrip()) <= indent:
                break
            picked.add(k + 1)
    return picked


def _lines(lines: list[int]) -> str:
    return ("line " if len(lines) == 1 else "lines ") + line_ranges(lines)


def line_ranges(lines: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    out: list[str] = []
    start = prev = None
    for line in lines:
        if prev is not None and line == prev + 1:
            prev = line
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = line
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


def function_body_lines(source: str, span: tuple[int, int] | None = None) -> set[int]:
    """First lines of the statements inside function bodies (those of the function whose
    ``def`` lies in ``span``, or of every function): what runs when the env is used. Module
    code, ``class`` and ``def`` lines run once, at import, before any counting starts."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if span is not None and not span[0] <= node.lineno <= span[1]:
            continue
        for inner in node.body:
            lines.update(n.lineno for n in ast.walk(inner) if isinstance(n, ast.stmt))
    return lines


class PythonCoverage:
    """coverage.py over one source file in this process: the statements in its functions, or in
    the one function whose ``def`` is in ``span``. ``start`` forgets what was counted; ``read``
    returns everything counted since and keeps counting."""

    def __init__(self, path: Path, scope: str = "file", span: tuple[int, int] | None = None):
        import coverage

        self.path = str(Path(path).resolve())
        self.scope = scope
        self.span = span
        self._cov = coverage.Coverage(
            data_file=None, include=[self.path], config_file=False, branch=False
        )
        # a window may run no line of the file (a level's reset sweep): not worth a warning
        self._cov.set_option("run:disable_warnings", ["no-data-collected"])
        self._statements: list[int] | None = None
        self._body: set[int] | None = None
        self._running = False

    def start(self) -> None:
        if self._running:
            self._cov.stop()
        self._cov.erase()
        self._cov.start()
        self._running = True

    def read(self) -> LineCoverage:
        if self._running:
            self._cov.stop()
        executed = set(self._cov.get_data().lines(self.path) or [])
        if self._statements is None:
            self._statements = list(self._cov.analysis2(self.path)[1])
        if self._running:
            self._cov.start()
        lines = {line: int(line in executed) for line in self._statements if self._in_scope(line)}
        return LineCoverage(self.path, self.scope, lines)

    def _in_scope(self, line: int) -> bool:
        if self._body is None:
            self._body = function_body_lines(Path(self.path).read_text(), self.span)
        return line in self._body

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Not counting (a reset sweep of millions of seeds need not run traced)."""
        running = self._running
        if running:
            self._cov.stop()
        try:
            yield
        finally:
            if running:
                self._cov.start()

    def close(self) -> None:
        if self._running:
            self._cov.stop()
            self._running = False
