"""MutationReport: each mutant's fate, kill rates per level, survivors, equivalence, localization."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from envforge.mutate.differential import DifferentialResult
from envforge.mutate.execute import MutantRun
from envforge.mutate.triage import (
    affected_keys,
    differential_equivalence,
    field_localized,
    line_localized,
    site_localized,
    static_equivalence,
    tolerance_equivalence,
)

KILL_TARGET = 0.95
LOCALIZATION_TARGET = 0.80


@dataclass
class Outcome:
    id: str
    operator: str
    file: str
    line: int
    description: str
    status: str
    """killed | survived | equivalent | stillborn | timeout | error (stillborn: the mutated
    side did not build or import, e.g. a Rust mutant whose crate does not compile)"""
    level: int | None = None
    """First level that did not pass (the killing level)."""
    check: str | None = None
    finding_fields: list[str] = field(default_factory=list)
    affected: list[str] = field(default_factory=list)
    """Keys the mutant changes in one step (differential)."""
    field_localized: bool | None = None
    line_localized: bool | None = None
    site_localized: bool | None = None
    """A crash finding (no field) raised in the mutated handler (``triage.site_localized``)."""
    handler: str | None = None
    """The handler the finding's crash site lies in, when it names one."""
    equivalence: str | None = None
    witness: dict[str, Any] | None = None
    diff: str = ""
    wall_s: float = 0.0
    error: str = ""
    retimed_from: float | None = None
    """The call limit of a first verify that timed out; this outcome is the re-run's."""


def judge(run: MutantRun, original: str, state_fields: list[str]) -> Outcome:
    job, m = run.job, run.job.mutant
    out = Outcome(m.id, m.operator, m.file, m.line, m.description, "error", wall_s=run.wall_s)
    out.retimed_from = run.retimed_from
    diff = DifferentialResult.from_dict(run.differential) if run.differential else None
    affected = affected_keys(diff, state_fields)
    out.affected = sorted(affected)
    if run.report is None:
        out.status = "timeout" if run.timed_out else "error"
        out.error = run.error or f"no report (during {run.phase})"
        out.diff = m.diff(original)
        return out
    failed = [lv for lv in run.report["levels"] if lv["status"] != "pass"]
    if run.report["verdict"] == "equivalent" or not failed:
        full = diff is not None and diff.effort == "full"
        reason = (
            static_equivalence(m, original)
            or differential_equivalence(diff, full)
            or tolerance_equivalence(diff, full)
        )
        out.status = "equivalent" if reason else "survived"
        out.equivalence = reason
        out.witness = diff.witness if diff else None
        if diff is None or (diff.inconclusive and not diff.differs):
            out.error = "no full differential result: equivalence unknown"
        elif diff.error:
            out.witness = {"mutant_error": diff.error}
        out.diff = m.diff(original)
        return out
    first = failed[0]
    finding = run.first_finding
    extra = (finding or {}).get("extra") or {}
    if extra.get("call") == "build" and extra.get("side") == job.target.side:
        out.status = "stillborn"  # says nothing about the verifier, as a mutant that won't parse
        out.error = str(finding.get("message", ""))[:300] if finding else ""
        out.diff = m.diff(original)
        return out
    out.status = "killed"
    out.level = int(first["level"])
    out.check = finding["check"] if finding else None
    out.finding_fields = list(finding.get("fields") or []) if finding else []
    out.field_localized = field_localized(finding, affected)
    out.line_localized = line_localized(finding, m, job.target.side)
    out.site_localized = site_localized(finding, m, job.target.side, original)
    out.handler = ((finding or {}).get("extra") or {}).get("handler")
    return out


@dataclass
class MutationReport:
    env: str
    side: str
    files: list[str]
    levels: list[int]
    options: dict[str, Any]
    generated: int
    stillborn: int
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def non_equivalent(self) -> int:
        return len(self.outcomes) - self.count("equivalent") - self.count("stillborn")

    @property
    def all_stillborn(self) -> int:
        """Set aside at generation (would not parse or compile) plus those run that the
        verifier could not build or import."""
        return self.stillborn + self.count("stillborn")

    @property
    def killed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "killed"]

    def kill_rate(self) -> float | None:
        return len(self.killed) / self.non_equivalent if self.non_equivalent else None

    def per_level(self) -> list[dict[str, Any]]:
        rows, cumulative = [], 0
        for lv in self.levels:
            n = sum(o.level == lv for o in self.killed)
            cumulative += n
            rows.append(
                {
                    "level": lv,
                    "killed_here": n,
                    "killed_through": cumulative,
                    "cumulative_kill_rate": cumulative / self.non_equivalent
                    if self.non_equivalent
                    else None,
                }
            )
        return rows

    def localization(self) -> dict[str, float | None]:
        kills = self.killed
        if not kills:
            return {"localized": None, "field": None, "site": None, "line": None}
        return {
            "localized": sum(bool(o.field_localized or o.site_localized) for o in kills)
            / len(kills),
            "field": sum(bool(o.field_localized) for o in kills) / len(kills),
            "site": sum(bool(o.site_localized) for o in kills) / len(kills),
            "line": sum(bool(o.line_localized) for o in kills) / len(kills),
        }

    def to_dict(self) -> dict[str, Any]:
        loc = self.localization()
        rate = self.kill_rate()
        return {
            "env": self.env,
            "side": self.side,
            "files": self.files,
            "levels": self.levels,
            "options": self.options,
            "generated": self.generated,
            "stillborn": self.all_stillborn,
            "run": len(self.outcomes),
            "status_counts": dict(Counter(o.status for o in self.outcomes)),
            "non_equivalent": self.non_equivalent,
            "kill_rate": rate,
            "per_level": self.per_level(),
            "localization": loc,
            "per_operator": self.per_operator(),
            "targets": {
                "kill_rate": KILL_TARGET,
                "kill_rate_met": rate is not None and rate >= KILL_TARGET,
                "localization": LOCALIZATION_TARGET,
                "localization_met": loc["localized"] is not None
                and loc["localized"] >= LOCALIZATION_TARGET,
            },
            "wall_s": round(self.wall_s, 1),
            "mutants": [o.__dict__ for o in self.outcomes],
        }

    def per_operator(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter[str]] = {}
        for o in self.outcomes:
            out.setdefault(o.operator, Counter())[o.status] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def render(self, console: Console | None = None) -> None:
        console = console or Console()
        table = Table(title=f"envforge mutate {self.env} ({self.side}): kills per level")
        for col in ("level", "killed here", "killed through", "cumulative kill rate"):
            table.add_column(col, justify="right")
        for row in self.per_level():
            rate = row["cumulative_kill_rate"]
            table.add_row(
                f"L{row['level']}",
                str(row["killed_here"]),
                str(row["killed_through"]),
                f"{100 * rate:.1f}%" if rate is not None else "-",
            )
        console.print(table)
        ops = Table(title="by operator")
        statuses = ("killed", "survived", "equivalent", "stillborn", "timeout", "error")
        ops.add_column("operator")
        for s in statuses:
            ops.add_column(s, justify="right")
        for op, counts in self.per_operator().items():
            ops.add_row(op, *(str(counts.get(s, 0)) for s in statuses))
        console.print(ops)
        rate, loc = self.kill_rate(), self.localization()
        console.print(
            f"{len(self.outcomes)} mutants run (of {self.generated} generated, "
            f"{self.all_stillborn} stillborn); "
            f"{self.count('equivalent')} equivalent; "
            f"kill rate {_pct(rate)} of {self.non_equivalent} non-equivalent "
            f"(target {100 * KILL_TARGET:.0f}%); localized {_pct(loc['localized'])} "
            f"(target {100 * LOCALIZATION_TARGET:.0f}%): field {_pct(loc['field'])}, "
            f"crash site {_pct(loc['site'])}, line {_pct(loc['line'])}"
        )
        for o in self.outcomes:
            if o.status in ("survived", "timeout", "error"):
                console.print(f"[red]{o.status}[/] {o.id} {o.description} {o.error}", markup=True)
                console.print(o.diff.rstrip(), markup=False, highlight=False)
                if o.witness:
                    console.print(f"  witness: {o.witness}", markup=False, highlight=False)
            elif o.status == "equivalent":
                console.print(f"[yellow]equivalent[/] {o.id} {o.description}: {o.equivalence}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
