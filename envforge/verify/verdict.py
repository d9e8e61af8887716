"""LevelResult and Report: the verdict, per level, with findings; rendered for people and JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envforge.coverage.lines import LineCoverage, merge_all
from envforge.untrusted.shown import indented, one_line, shown
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.groups import Group, rank, report_groups
from envforge.verify.levels import EQUIVALENCE_LEVELS, LEVEL_NAMES

STATUSES = ("pass", "fail", "error", "inconclusive", "skipped")
"""The levels a port must pass to be equivalent (L4, transfer, is optional)."""
REFERENCE_ERROR = "reference error"
"""The verdict when the reference could not be built or run: it says nothing about the port."""


@dataclass
class LevelResult:
    level: int
    status: str
    summary: str = ""
    findings: list[Finding] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    portable_summary: str = ""
    """The summary without what depends on machine speed (how far a time-budgeted sweep got),
    for agents: a replayed run must see the same text. Empty: ``summary`` has nothing such."""
    coverage: list[LineCoverage] | None = None
    """The reference's lines (C: and branches) this level executed, per source file."""
    reference_failed: bool = False
    """The reference (not the port) failed here: the report's verdict is "reference error"."""

    @property
    def name(self) -> str:
        return LEVEL_NAMES.get(self.level, f"L{self.level}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LevelResult:
        return cls(
            level=data["level"],
            status=data["status"],
            summary=data.get("summary", ""),
            findings=[Finding.from_dict(f) for f in data.get("findings", [])],
            stats=data.get("stats", {}),
            wall_s=data.get("wall_s", 0.0),
            coverage=[LineCoverage.from_dict(c) for c in data["reference_coverage"]]
            if data.get("reference_coverage") is not None
            else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "wall_s": round(self.wall_s, 3),
            "reference_failed": self.reference_failed,
            "stats": to_jsonable(self.stats),
            "findings": [f.to_dict() for f in self.findings],
            "reference_coverage": None
            if self.coverage is None
            else [c.to_dict() for c in self.coverage],
        }


@dataclass
class Report:
    env: str
    reference: str
    port: str
    levels: list[LevelResult] = field(default_factory=list)
    requested: list[int] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.reference_error is not None:
            return REFERENCE_ERROR
        statuses = {lv.level: lv.status for lv in self.levels}
        if all(statuses.get(n) == "pass" for n in self.requested):
            return "equivalent"
        if any(s == "fail" for s in statuses.values()):
            return "not equivalent"
        if any(s == "error" for s in statuses.values()):
            return "error"
        return "inconclusive"

    @property
    def passed(self) -> bool:
        return self.verdict == "equivalent"

    @property
    def levels_not_run(self) -> list[int]:
        """The equivalence levels this run did not ask for: an "equivalent" at levels 0-1 is
        not yet a port that is done."""
        return [n for n in EQUIVALENCE_LEVELS if n not in self.requested]

    def verdict_line(self) -> str:
        """``verdict: equivalent``, or for a pass at some levels only, which levels remain:
        ``verdict: equivalent at level 0 only; levels 1-3 not run yet``."""
        if not self.passed or not self.levels_not_run:
            return f"verdict: {self.verdict}"
        return (
            f"verdict: equivalent at {levels_phrase(self.requested)} only; "
            f"{levels_phrase(self.levels_not_run)} not run yet"
        )

    @property
    def reference_error(self) -> str | None:
        """What went wrong with the reference, in one line; None when it worked throughout."""
        for lv in self.levels:
            if lv.reference_failed:
                return lv.summary
        return None

    @property
    def exit_code(self) -> int:
        """0 equivalent; 1 a verdict against the port; 2 the reference is broken (bad input)."""
        if self.reference_error is not None:
            return 2
        return 0 if self.passed else 1

    @property
    def findings(self) -> list[Finding]:
        return [f for lv in self.levels for f in lv.findings]

    def first_finding(self) -> Finding | None:
        """The most useful finding for a repair prompt: lowest failing level, localized first."""
        for lv in self.levels:
            if lv.findings:
                ranked = sorted(lv.findings, key=first_finding_key)
                return ranked[0]
        return None

    def groups(self) -> list[Group]:
        """Every distinct difference of the run, merged by cause across levels, most
        fundamental first (``groups.py``)."""
        return report_groups(self.findings)

    def search_seconds(self) -> float:
        return sum(lv.wall_s for lv in self.levels)

    def groups_line(self) -> str:
        """``3 distinct differences found in 41.2 s of search:`` (empty when none)."""
        groups = self.groups()
        if not groups:
            return ""
        n = len(groups)
        return (
            f"{n} distinct difference{'s' * (n > 1)} found in {self.search_seconds():.1f} s "
            "of search:"
        )

    def coverage(self) -> tuple[str, list[LineCoverage]]:
        """The levels whose reference coverage was measured, as ``L1–L3``, and their coverage
        together (empty when none was measured)."""
        measured = [lv for lv in self.levels if lv.coverage is not None]
        if not measured:
            return "", []
        first, last = measured[0].level, measured[-1].level
        label = f"L{first}" if first == last else f"L{first}–L{last}"
        return label, merge_all([lv.coverage for lv in measured if lv.coverage is not None])

    def coverage_lines(self) -> list[str]:
        """``L1–L3 executed 94% of pong.c (...); never executed: lines ...``, one per file."""
        label, files = self.coverage()
        return [cov.sentence(label) for cov in files]

    def unrun_lines(self) -> list[str]:
        """The reference lines the coverage lines name as not (fully) run, with their text."""
        _, files = self.coverage()
        return [quote for cov in files for quote in cov.quoted()]

    def to_dict(self) -> dict[str, Any]:
        label, files = self.coverage()
        return {
            "env": self.env,
            "reference": self.reference,
            "port": self.port,
            "verdict": self.verdict,
            "requested_levels": self.requested,
            "levels": [lv.to_dict() for lv in self.levels],
            "groups": [g.to_dict() for g in self.groups()],
            "search_s": round(self.search_seconds(), 1),
            "reference_coverage": {"levels": label, "files": [c.to_dict() for c in files]}
            if files
            else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """A report read back from its JSON (``envforge verify --json``, the MCP server's)."""
        return cls(
            env=data["env"],
            reference=data["reference"],
            port=data["port"],
            levels=[LevelResult.from_dict(lv) for lv in data.get("levels", [])],
            requested=list(data.get("requested_levels", [])),
        )

    def render(self, console: Console | None = None, max_findings: int = 3) -> None:
        console = console or Console()
        title = f"envforge verify {self.env}: {self.port} vs {self.reference}"
        table = Table(title=shown(one_line(title)))
        for col in ("level", "status", "time", "summary"):
            table.add_column(col)
        colors = {
            "pass": "green",
            "fail": "red",
            "error": "red",
            "inconclusive": "yellow",
            "skipped": "dim",
        }
        for lv in self.levels:
            c = colors.get(lv.status, "white")
            # the summary quotes the sides (an exception's message): data, not markup
            table.add_row(
                f"L{lv.level} {lv.name}",
                Text(lv.status, style=c),
                f"{lv.wall_s:.1f}s",
                shown(indented(lv.summary, "  ")),
            )
        console.print(table)
        for line in self.coverage_lines():
            console.print(shown(line))
        groups = self.groups()
        if groups:
            console.print(shown(self.groups_line()))
        for group in groups:
            console.print(shown(group_line(group)), soft_wrap=True)
        for group in groups[:max_findings]:
            console.print(shown(render_finding(group.finding)))
        color = "red" if not self.passed else "yellow" if self.levels_not_run else "green"
        console.print(f"[bold {color}]{self.verdict_line()}[/]", highlight=False, soft_wrap=True)


def first_finding_key(f: Finding) -> tuple:
    """Localized first; among a level's groups the most fundamental (a state group before the
    observation group it may explain); then the fewest fields."""
    cause = f.extra.get("cause")
    return (not f.localized, rank(cause) if isinstance(cause, str) else (1, 0), len(f.fields) or 99)


def levels_phrase(levels: list[int], named: bool = True) -> str:
    """[0] -> "level 0"; [1, 2, 3] -> "levels 1-3"; [1, 3] -> "levels 1,3" (``named=False``:
    without the word)."""
    ordered = sorted(levels)
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        text = f"{ordered[0]}-{ordered[-1]}"
    else:
        text = ",".join(str(n) for n in ordered)
    if not named:
        return text
    return f"level {text}" if len(ordered) == 1 else f"levels {text}"


def group_line(group: Group) -> str:
    """One line per group: cause, levels, count, where in the port."""
    f = group.finding
    levels = "".join(f"L{n}" for n in sorted(group.levels))
    where = f" at {Path(f.port_lines[0].file).name}:{f.port_lines[0].line}" if f.port_lines else ""
    times = f" x{group.count}" if group.count > 1 else ""
    return f"  {group.cause:<14} {levels:<6} {f.check}{times}{where}: {first_line(f.message)}"


def first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def render_finding(f: Finding) -> str:
    """A finding as plain text (used by the console and by repair prompts). What the sides
    wrote is indented past its first line: no line of it starts where the verdict does."""
    lines = [f"[L{f.level} {f.check}] {indented(f.message)}"]
    if f.fields:
        lines.append(f"  fields: {', '.join(f.fields)}")
    if f.seed is not None or f.step is not None:
        lines.append(f"  seed: {f.seed}  step: {f.step}")
    if f.actions:
        shown = f.actions if len(f.actions) <= 40 else [*f.actions[:10], "...", *f.actions[-25:]]
        lines.append(f"  actions ({len(f.actions)}): {shown}")
    if f.state_before is not None:
        lines.append(f"  state before: {indented(f.state_before)}")
    if f.expected is not None:
        lines.append(f"  expected (reference): {indented(f.expected)}")
        lines.append(f"  actual (port):        {indented(f.actual)}")
    if f.extra.get("count", 1) > 1:
        lines.append(f"  seen in {f.extra['count']} compared transitions")
    for follows in f.extra.get("may_follow", []):
        lines.append(
            f"  may follow from it: {follows['cause']} ({follows['count']} transitions whose "
            f"step reads {follows['reads']}): {one_line(follows['message'])}"
        )
    lines.extend(f"  in plain words: {one_line(text)}" for text in f.extra.get("explanations", []))
    if f.error:
        lines.append("  error: " + ", ".join(f"{k}={v:.6g}" for k, v in f.error.items()))
    for title, locs in (("reference", f.reference_lines), ("port", f.port_lines)):
        if locs:
            lines.append(f"  {title} lines that assign it, then what those read:")
            lines.extend(f"    {one_line(loc)}" for loc in locs)
    if f.detail:
        lines.append("  detail: " + indented(f.detail.strip()))
    return "\n".join(lines)
