"""MutationReport: each mutant's fate, kill rates per level, survivors, equivalence, localization."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envforge.mutate.differential import DifferentialResult
from envforge.mutate.execute import MutantRun
from envforge.mutate.handlers import HandlerMap, truncated
from envforge.mutate.triage import (
    affected_keys,
    differential_equivalence,
    draw_localized,
    field_localized,
    line_localized,
    site_localized,
    static_equivalence,
    tolerance_equivalence,
)
from envforge.untrusted.shown import indented, one_line, shown

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
    draw_localized: bool | None = None
    """An ``rng.tape`` finding naming the draw the mutant changed (``triage.draw_localized``)."""
    handler: str | None = None
    """The handler the finding's crash site lies in, when it names one."""
    mutated_handlers: list[str] | None = None
    """The env's handlers the mutated line belongs to (``[verify] handlers``; ``handlers.py``):
    [] for a line in none, None when the env declares no handlers."""
    named_handlers: list[str] = field(default_factory=list)
    """The env's handlers the killing finding names (in its words, or as its crash site)."""
    handler_localized: bool | None = None
    """A kill of a mutant in a handler whose finding names that handler; None otherwise."""
    first_named_handler: str | None = None
    """The handler the finding names first (``HandlerMap.first_named``): the stricter reading,
    since a finding may name every handler that wrote a diverging field."""
    finding_message: str = ""
    finding_explain: str = ""
    """The killing finding's message and ``[verify] explain`` text (truncated): enough to judge
    the kill again without running it."""
    equivalence: str | None = None
    witness: dict[str, Any] | None = None
    diff: str = ""
    wall_s: float = 0.0
    error: str = ""
    retimed_from: float | None = None
    """The call limit of a first verify that timed out; this outcome is the re-run's."""
    rerun: dict[str, Any] | None = None
    """Set when this outcome comes from running the mutant again alone, after its campaign
    (``mutate/rerun.py``): why, with which time limit, when, and the campaign's own outcome."""


def judge(
    run: MutantRun, original: str, state_fields: list[str], handlers: HandlerMap | None = None
) -> Outcome:
    job, m = run.job, run.job.mutant
    out = Outcome(m.id, m.operator, m.file, m.line, m.description, "error", wall_s=run.wall_s)
    out.retimed_from = run.retimed_from
    if handlers is not None:
        out.mutated_handlers = handlers.at(m.file, original, m.line)
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
    out.draw_localized = draw_localized(finding)
    out.handler = extra.get("handler")
    out.finding_message = truncated(str((finding or {}).get("message") or ""))
    out.finding_explain = truncated(str(extra.get("explain") or ""))
    if handlers is not None:
        out.named_handlers = handlers.named(finding)
        out.first_named_handler = handlers.first_named(finding)
        if out.mutated_handlers:
            out.handler_localized = bool(set(out.mutated_handlers) & set(out.named_handlers))
    return out


def localized(o: Outcome) -> bool:
    """The headline judgement of a kill: by handler when its mutated line lies in one of the
    env's handlers, else by field, crash site or draw."""
    if o.mutated_handlers:
        return bool(o.handler_localized)
    return bool(o.field_localized or o.site_localized or o.draw_localized)


@dataclass
class MutationReport:
    env: str
    side: str
    files: list[str]
    levels: list[int]
    options: dict[str, Any]
    generated: int
    stillborn: int
    exempt: int = 0
    """Mutants not generated: on lines marked ``envforge: no-mutate`` (``generate.NO_MUTATE``)."""
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0
    handlers: bool = False
    """The env declares its handlers (``[verify] handlers``): the headline judges by them."""

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
        """Shares of kills: ``localized`` (the headline: ``localized()``), ``field``, ``site``,
        ``draw``, ``line``, and ``handler``: of the kills of mutants in a handler, those whose finding
        named it (None when no kill was in one)."""
        kills = self.killed
        in_handler = [o for o in kills if o.mutated_handlers]
        out: dict[str, float | None] = {"localized": None, "field": None, "site": None}
        out |= {"draw": None, "line": None, "handler": None}
        if in_handler:
            out["handler"] = sum(bool(o.handler_localized) for o in in_handler) / len(in_handler)
        if not kills:
            return out
        for key, judged in (
            ("localized", localized),
            ("field", lambda o: bool(o.field_localized)),
            ("site", lambda o: bool(o.site_localized)),
            ("draw", lambda o: bool(o.draw_localized)),
            ("line", lambda o: bool(o.line_localized)),
        ):
            out[key] = sum(judged(o) for o in kills) / len(kills)
        return out

    def handler_summary(self) -> dict[str, Any]:
        """How the handler measure was taken: kills in a handler, how many named it, and how
        many handlers a finding named on average (a finding naming many says less)."""
        in_handler = [o for o in self.killed if o.mutated_handlers]
        return {
            "declared": self.handlers,
            "kills_in_handlers": len(in_handler),
            "handler_localized": sum(bool(o.handler_localized) for o in in_handler),
            "first_named_localized": sum(
                o.first_named_handler in (o.mutated_handlers or []) for o in in_handler
            ),
            "mean_named": sum(len(o.named_handlers) for o in in_handler) / len(in_handler)
            if in_handler
            else None,
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
            "exempt": self.exempt,
            "run": len(self.outcomes),
            "status_counts": dict(Counter(o.status for o in self.outcomes)),
            "non_equivalent": self.non_equivalent,
            "kill_rate": rate,
            "per_level": self.per_level(),
            "localization": loc,
            "handlers": self.handler_summary(),
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
            ops.add_row(shown(one_line(op)), *(str(counts.get(s, 0)) for s in statuses))
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
            + (self._handler_text() if self.handlers else "")
        )
        for o in self.outcomes:
            # descriptions, diffs and errors quote the port's source and what its run said
            if o.status in ("survived", "timeout", "error"):
                said = indented(f"{o.id} {o.description} {o.error}")
                console.print(Text.assemble((o.status, "red"), " ", shown(said)))
                console.print(shown(o.diff.rstrip()))  # diff lines start with + - @ or a space
                if o.witness:
                    console.print(shown(f"  witness: {indented(o.witness)}"))
            elif o.status == "equivalent":
                said = indented(f"{o.id} {o.description}: {o.equivalence}")
                console.print(Text.assemble(("equivalent", "yellow"), " ", shown(said)))

    def _handler_text(self) -> str:
        h = self.handler_summary()
        return (
            f"; by handler: {h['handler_localized']} of {h['kills_in_handlers']} kills of "
            f"mutants in a handler named it, {h['first_named_localized']} named it first (the "
            "rest by field or crash site)"
        )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
