"""Which rules lines a version's code relies on: its comments cite them (``# L9``, ``# rules
L9-10``), and the lines a step executed pick the citations that apply.

A citation applies to the line it is written on and, when it sits in a comment block of its
own, to the statements below it up to the next blank line. So a version written as the drafting
prompt asks (cite the rule above the code that implements it) answers "which rules did this
step use" from its line coverage alone.
"""

from __future__ import annotations

from pathlib import Path

from envforge.coverage.lines import LineCoverage
from envforge.rules.text import parse_citations


def citation_map(source: str) -> dict[int, list[int]]:
    """Source line -> the rules lines cited for it."""
    cited: dict[int, list[int]] = {}
    pending: list[int] = []
    for number, raw in enumerate(source.splitlines(), 1):
        line = raw.strip()
        if not line:
            pending = []
            continue
        code, _, comment = raw.partition("#")
        found = parse_citations(comment) if comment else []
        if not code.strip():  # a comment line: what it cites covers the code below it
            pending = pending + [n for n in found if n not in pending]
            continue
        here = pending + [n for n in found if n not in pending]
        if here:
            cited[number] = here
    return cited


def cited_by_run(coverage: list[LineCoverage] | None, sources: list[Path]) -> list[int]:
    """The rules lines cited on the lines ``coverage`` saw executed, in rules order."""
    if not coverage:
        return []
    known = {p.name: p for p in sources}
    lines: set[int] = set()
    for cov in coverage:
        # matched by name: a sandboxed driver names its files as its own view shows them, and
        # the host reads only the file it named itself
        if not isinstance(cov, LineCoverage) or not isinstance(cov.file, str):
            continue  # what a sandboxed side sent is checked before it is read
        path = known.get(Path(cov.file).name)
        if path is None or not path.is_file() or not isinstance(cov.lines, dict):
            continue
        cited = citation_map(path.read_text(errors="replace"))
        for number, count in cov.lines.items():
            if isinstance(number, int) and isinstance(count, int) and count > 0:
                lines.update(cited.get(number, []))
    return sorted(lines)
