"""The run's other groups as a repair prompt lists them: one bounded line each, after the
finding it shows in full, most fundamental first."""

from __future__ import annotations

from pathlib import Path

from envforge.untrusted.shown import one_line
from envforge.verify.findings import Finding
from envforge.verify.verdict import Report

GROUPS_LISTED = 8
"""Other groups a prompt lists (the rest are counted): a prompt stays within its size bound."""
LINE_CHARS = 240


def other_groups(
    report: Report | None, shown: Finding | None, scrub: object = None
) -> tuple[list[str], int]:
    """One line per group of ``report`` other than the one ``shown`` in full, and how many
    more were not listed. ``scrub`` (text -> text) makes paths relative."""
    if report is None:
        return [], 0
    lines = []
    others = [g for g in report.groups() if g.finding is not shown]
    for group in others[:GROUPS_LISTED]:
        f = group.finding
        where = ""
        if f.port_lines:
            loc = f.port_lines[0]
            where = f"; port line {Path(loc.file).name}:{loc.line}: {loc.text.strip()}"
        seen = f", seen {group.count} times" if group.count > 1 else ""
        text = f"{group.cause} (L{f.level} {f.check}{seen}): {f.message}{where}"
        if callable(scrub):
            text = scrub(text)
        text = one_line(text)
        lines.append(text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "...")
    return lines, max(0, len(others) - GROUPS_LISTED)
