"""``envforge mutate --combine K``: K mutants applied together, verified once; is every one
of them named?

A verify that names every distinct difference should name each planted bug of a port that has
several. Mutants keep the file's line count, so K mutants of one file whose changed lines do
not touch combine line by line into one source. Each combination is verified once (every
group, not the first: no ``--fail-fast``), and a component is *named* when its mutated line is
among the port lines the run's groups show (the first ``SHOWN`` of each, as a report prints
them). The campaign's number is the share of combinations whose every component is named.
Components are drawn from mutants a recorded campaign killed (``--killed-from``): a mutant
that is equivalent on its own cannot be named in company either.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envforge.errors import BadInput
from envforge.mutate.execute import MutantJob, MutantRun, run_jobs
from envforge.mutate.generate import generate
from envforge.mutate.mutant import Mutant
from envforge.mutate.workspace import Target
from envforge.verify.context import VerifyOptions

SHOWN = 10
"""Port lines of a group that count as shown (a repair prompt's ``LINES_SHOWN``)."""
GAP = 2
"""Components' changed lines lie at least this far apart (one edit cannot mask another's)."""


def changed_lines(original: str, mutant: Mutant) -> set[int]:
    before, after = original.splitlines(), mutant.source.splitlines()
    return {i + 1 for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b}


def merged(original: str, parts: list[Mutant]) -> Mutant:
    """One mutant carrying every part's changed lines."""
    lines = original.splitlines(keepends=True)
    for part in parts:
        theirs = part.source.splitlines(keepends=True)
        for n in changed_lines(original, part):
            lines[n - 1] = theirs[n - 1]
    return Mutant(
        id="+".join(p.id for p in parts),
        operator="combined",
        file=parts[0].file,
        line=min(p.line for p in parts),
        description=" + ".join(p.description for p in parts),
        source="".join(lines),
    )


def combinations(
    mutants: list[Mutant], original: str, k: int, count: int, seed: int
) -> list[tuple[list[Mutant], Mutant]]:
    """Up to ``count`` seeded combinations of ``k`` mutants with lines ``GAP`` apart, each
    mutant in as few combinations as the count allows."""
    rng = random.Random(f"combine {seed}")
    pool = list(mutants)
    out: list[tuple[list[Mutant], Mutant]] = []
    tries = 0
    while len(out) < count and tries < 50 * count and len(pool) >= k:
        tries += 1
        rng.shuffle(pool)
        parts: list[Mutant] = []
        for m in pool:
            lines = changed_lines(original, m)
            taken = {n for p in parts for n in changed_lines(original, p)}
            if all(abs(a - b) >= GAP for a in lines for b in taken):
                parts.append(m)
            if len(parts) == k:
                break
        if len(parts) < k:
            continue
        key = sorted(p.id for p in parts)
        if any(sorted(p.id for p in c) == key for c, _ in out):
            continue
        out.append((sorted(parts, key=lambda p: p.line), merged(original, parts)))
    return out


def shown_lines(report: dict[str, Any] | None) -> set[tuple[str, int]]:
    """(file name, line) of every port line the run's groups show."""
    out: set[tuple[str, int]] = set()
    for level in (report or {}).get("levels", []):
        for finding in level.get("findings", []):
            for loc in (finding.get("port_lines") or [])[:SHOWN]:
                out.add((str(loc.get("file", "")).rsplit("/", 1)[-1], int(loc.get("line", -1))))
    return out


@dataclass
class Combination:
    components: list[str]
    lines: list[int]
    named: list[bool]
    groups: int
    verdict: str
    wall_s: float
    error: str = ""

    @property
    def all_named(self) -> bool:
        return all(self.named) and not self.error


@dataclass
class CombineReport:
    env: str
    k: int
    combinations: list[Combination] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def share(self) -> float | None:
        judged = [c for c in self.combinations if not c.error]
        return sum(c.all_named for c in judged) / len(judged) if judged else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "combine": self.k,
            "all_named_share": self.share,
            "wall_s": round(self.wall_s, 1),
            "combinations": [dict(vars(c), all_named=c.all_named) for c in self.combinations],
        }

    def lines(self) -> list[str]:
        share = "n/a" if self.share is None else f"{self.share:.1%}"
        out = [
            f"{self.env}: {len(self.combinations)} combinations of {self.k} mutants; every "
            f"component named in {share} (target 90%), {self.wall_s:.0f} s"
        ]
        for c in self.combinations:
            marks = ", ".join(
                f"{cid} {'named' if ok else 'NOT named'}"
                for cid, ok in zip(c.components, c.named, strict=True)
            )
            out.append(
                f"  {c.verdict}, {c.groups} groups: {marks}" + (f" ({c.error})" if c.error else "")
            )
        return out


def killed_ids(path: Path) -> list[str]:
    """The mutants a recorded campaign (``docs/mutate/<env>.json``) killed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"--killed-from {path}: {exc}") from None
    return [m["id"] for m in data.get("mutants", []) if m.get("status") == "killed"]


def run_combined(
    target: Target,
    levels: list[int],
    options: VerifyOptions,
    k: int,
    count: int,
    killed: list[str] | None,
    seed: int = 0,
    parallel: int = 2,
    time_limit_s: float = 900.0,
) -> CombineReport:
    if k < 2:
        raise BadInput(f"--combine {k}: combine at least 2 mutants")
    start = time.perf_counter()
    path = target.files[0]
    rel = str(path.relative_to(target.root))
    gen = generate(path, rel, target.spec)
    pool = [m for m in gen.mutants if killed is None or m.id in set(killed)]
    combos = combinations(pool, gen.original, k, count, seed)
    report = CombineReport(target.spec.name, k)
    options = replace(options, fail_fast=False)
    with tempfile.TemporaryDirectory(prefix="envforge-combined-") as tmp:
        jobs = [
            MutantJob(target, m, Path(tmp), tuple(levels), options, gen.original, False)
            for _, m in combos
        ]
        runs: list[MutantRun] = run_jobs(jobs, parallel, time_limit_s, lambda run: None)
    by_id = {run.job.mutant.id: run for run in runs}
    name = rel.rsplit("/", 1)[-1]
    for parts, combined in combos:
        run = by_id[combined.id]
        shown = shown_lines(run.report)
        groups = sum(len(lv.get("findings", [])) for lv in (run.report or {}).get("levels", []))
        report.combinations.append(
            Combination(
                components=[p.id for p in parts],
                lines=[p.line for p in parts],
                named=[(name, p.line) in shown for p in parts],
                groups=groups,
                verdict=(run.report or {}).get("verdict", "no report"),
                wall_s=round(run.wall_s, 1),
                error=run.error or ("timed out" if run.timed_out else ""),
            )
        )
    report.wall_s = time.perf_counter() - start
    return report
