"""BenchReport: measured steps/s side by side, ratios to the reference, ceiling and targets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envforge.bench.ceiling import Machine, StepCost, ceiling_sps, limits
from envforge.bench.measure import Measurement
from envforge.untrusted.shown import indented, one_line, shown

TARGET_RATIO = {"c": 2.0, "gymnasium": 500.0, "python": 500.0}
"""Port speed-up over the reference a port should reach, by reference kind (C loop / Python)."""
CEILING_FACTOR = 3.0
"""A port should reach at least 1/CEILING_FACTOR of the estimated ceiling."""
JUDGED_POLICY = "random"
"""The targets are the env's own speed (its ceiling is the env's limit: its state's bytes and
its step's ops), so they are judged on the random-action rows, where the loop is the env. The
MLP rows measure a loop that also runs a policy: reported beside them (ratio, share of a
ceiling that adds the MLP's ops), not judged."""


def fmt_sps(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


@dataclass
class Summary:
    implementation: str
    role: str
    policy: str
    best_sps: float | None
    best_batch: int | None
    ratio_to_reference: float | None
    """Best SPS over the reference's best SPS (same policy, same run)."""
    ceiling_sps: float | None
    ceiling_bound: str
    fraction_of_ceiling: float | None
    compile_s: float | None
    best_cpu_sps: float | None
    """Best env steps per CPU-second (all threads' CPU time): per-core efficiency."""
    cpu_ratio_to_reference: float | None
    meets_ratio_target: bool | None
    meets_ceiling_target: bool | None


@dataclass
class BenchReport:
    env: str
    reference: str
    settings: dict[str, Any]
    machine: dict[str, Any]
    date: str
    command: str = ""
    measurements: list[Measurement] = field(default_factory=list)
    cost: dict[str, Any] | None = None
    skipped: list[str] = field(default_factory=list)

    @property
    def reference_kind(self) -> str:
        from envforge.spec import reference_kind

        return reference_kind(self.reference)

    def implementations(self) -> list[tuple[str, str, str]]:
        seen: dict[tuple[str, str, str], None] = {}
        for m in self.measurements:
            seen[(m.implementation, m.role, m.policy)] = None
        return list(seen)

    def series(self, implementation: str, policy: str) -> list[Measurement]:
        return [
            m
            for m in self.measurements
            if m.implementation == implementation and m.policy == policy
        ]

    def best(self, implementation: str, policy: str) -> Measurement | None:
        rows = [m for m in self.series(implementation, policy) if m.sps is not None]
        return max(rows, key=lambda m: m.sps or 0.0) if rows else None

    def reference_best(self, policy: str, cpu: bool = False) -> float | None:
        rows = [m for m in self.measurements if m.role == "reference" and m.policy == policy]
        values = [v for m in rows if (v := (m.cpu_sps if cpu else m.sps)) is not None]
        return max(values) if values else None

    def best_cpu(self, implementation: str, policy: str) -> float | None:
        values = [m.cpu_sps for m in self.series(implementation, policy) if m.cpu_sps]
        return max(values) if values else None

    def summaries(self) -> list[Summary]:
        out = []
        target = TARGET_RATIO.get(self.reference_kind)
        for impl, role, policy in self.implementations():
            best = self.best(impl, policy)
            sps = best.sps if best else None
            ref = self.reference_best(policy)
            ratio = sps / ref if (sps and ref) else None
            ceiling, bound = (None, "")
            if self.cost is not None:
                ceiling, bound = ceiling_sps(
                    Machine(**self.machine),
                    StepCost(**self.cost),
                    policy,
                    best.batch if best else None,
                )
            fraction = sps / ceiling if (sps and ceiling) else None
            judged = role == "port" and policy == JUDGED_POLICY
            cpu = self.best_cpu(impl, policy)
            cpu_ref = self.reference_best(policy, cpu=True)
            out.append(
                Summary(
                    implementation=impl,
                    role=role,
                    policy=policy,
                    best_sps=sps,
                    best_batch=best.batch if best else None,
                    ratio_to_reference=ratio,
                    ceiling_sps=ceiling,
                    ceiling_bound=bound,
                    fraction_of_ceiling=fraction,
                    compile_s=best.compile_s if best else None,
                    best_cpu_sps=cpu,
                    cpu_ratio_to_reference=cpu / cpu_ref if (cpu and cpu_ref) else None,
                    meets_ratio_target=(ratio >= target)
                    if (judged and ratio is not None and target)
                    else None,
                    meets_ceiling_target=(fraction >= 1 / CEILING_FACTOR)
                    if (judged and fraction is not None)
                    else None,
                )
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "reference": self.reference,
            "date": self.date,
            "command": self.command,
            "settings": self.settings,
            "machine": self.machine,
            "step_cost": self.cost,
            "targets": {
                "ratio_to_reference": TARGET_RATIO.get(self.reference_kind),
                "fraction_of_ceiling": 1 / CEILING_FACTOR,
            },
            "measurements": [m.to_dict() for m in self.measurements],
            "summary": [s.__dict__ for s in self.summaries()],
            "skipped": self.skipped,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchReport:
        return cls(
            env=data["env"],
            reference=data["reference"],
            settings=data["settings"],
            machine=data["machine"],
            date=data["date"],
            command=data.get("command", ""),
            measurements=[Measurement.from_dict(m) for m in data["measurements"]],
            cost=data.get("step_cost"),
            skipped=data.get("skipped", []),
        )

    def merged(self, newer: BenchReport) -> BenchReport:
        """This report with ``newer``'s rows in place of its own: each (implementation,
        policy) series ``newer`` measured replaces the same series here whole (so one line
        of the table never mixes two runs), every other row stays as recorded. The new rows
        carry their own run's date, CPU, load and command (``Measurement.measured``); this
        report's date, machine, command and step cost stay, and are still the other rows'.
        When ``newer`` replaces every series, it is returned whole (its own date and machine)."""
        if newer.env != self.env:
            raise ValueError(f"cannot merge a {newer.env} run into the {self.env} report")
        mine = newer.machine
        stamp = {
            "date": newer.date,
            "cpu": mine.get("cpu"),
            "cores": mine.get("cores"),
            "load_before": list(mine.get("load_before") or []),
            "command": newer.command,
        }
        replaced = {(m.implementation, m.policy) for m in newer.measurements}
        kept = [m for m in self.measurements if (m.implementation, m.policy) not in replaced]
        if not kept:  # every row measured again: the new run is the whole record
            return replace(newer, cost=newer.cost or self.cost)
        fresh = [
            Measurement.from_dict({**m.to_dict(), "measured": stamp}) for m in newer.measurements
        ]
        return BenchReport(
            env=self.env,
            reference=self.reference,
            settings=self.settings,
            machine=self.machine,
            date=self.date,
            command=self.command,
            measurements=kept + fresh,
            cost=self.cost or newer.cost,
            skipped=[s for s in self.skipped if not any(s.startswith(i) for i, _ in replaced)]
            + newer.skipped,
        )

    def separately_measured(self) -> list[tuple[str, dict[str, Any]]]:
        """(implementation, where and when) of each series merged in from another run."""
        seen: dict[str, dict[str, Any]] = {}
        for m in self.measurements:
            if m.measured is not None:
                seen.setdefault(m.implementation, m.measured)
        return list(seen.items())

    # ---- rendering ----------------------------------------------------------------------
    def sps_table(self) -> Table:
        batches = sorted({m.batch for m in self.measurements})
        table = Table(title=f"envforge bench {self.env}: env steps per second (median)")
        table.add_column("implementation")
        table.add_column("policy")
        for b in batches:
            table.add_column(f"B={b}", justify="right")
        for impl, _, policy in self.implementations():
            by_batch = {m.batch: m for m in self.series(impl, policy)}
            cells = [fmt_sps(by_batch[b].sps) if b in by_batch else "" for b in batches]
            table.add_row(shown(one_line(impl)), shown(one_line(policy)), *cells)
        return table

    def summary_table(self) -> Table:
        table = Table(title="best of each: ratio to the reference, share of the estimated ceiling")
        for col in ("implementation", "policy", "best SPS", "at B", "x reference"):
            table.add_column(
                col, justify="left" if col in ("implementation", "policy") else "right"
            )
        for col in ("per CPU-s", "x ref per CPU-s", "ceiling", "of ceiling", "compile s"):
            table.add_column(col, justify="right")
        table.add_column("targets")
        for s in self.summaries():
            marks = []
            if s.meets_ratio_target is not None:
                marks.append("ratio " + ("met" if s.meets_ratio_target else "MISSED"))
            if s.meets_ceiling_target is not None:
                marks.append("ceiling " + ("met" if s.meets_ceiling_target else "MISSED"))
            table.add_row(
                shown(one_line(s.implementation)),
                shown(one_line(s.policy)),
                fmt_sps(s.best_sps),
                str(s.best_batch or "-"),
                f"{s.ratio_to_reference:.3g}x" if s.ratio_to_reference else "-",
                fmt_sps(s.best_cpu_sps),
                f"{s.cpu_ratio_to_reference:.3g}x" if s.cpu_ratio_to_reference else "-",
                f"{fmt_sps(s.ceiling_sps)} ({s.ceiling_bound})" if s.ceiling_sps else "-",
                f"{100 * s.fraction_of_ceiling:.3g}%" if s.fraction_of_ceiling else "-",
                f"{s.compile_s:.2f}" if s.compile_s is not None else "-",
                ", ".join(marks),
            )
        return table

    def render(self, console: Console | None = None) -> None:
        console = console or Console()
        m = self.machine
        machine = (
            f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
            f"{limits(m)}; load before {m['load_before'][0]:.2f}"
        )
        console.print(shown(one_line(machine)))
        console.print(self.sps_table())
        console.print(self.summary_table())
        for line in self.skipped:
            # a skip quotes what the port's build or run said
            console.print(Text.assemble(("skipped:", "yellow"), " ", shown(indented(line))))

    def plot(self, path: str) -> None:
        """SPS against batch size, log-log, one line per implementation and policy."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for impl, _, policy in self.implementations():
            rows = [m for m in self.series(impl, policy) if m.sps is not None]
            if rows:
                style = "-" if policy == "random" else "--"
                ax.plot(
                    [m.batch for m in rows],
                    [m.sps or 0.0 for m in rows],
                    style,
                    marker="o",
                    label=f"{impl} ({policy})",
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size (envs)")
        ax.set_ylabel("env steps per second")
        ax.set_title(f"envforge bench {self.env} ({self.date})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
