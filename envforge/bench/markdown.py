"""BenchReports as a Markdown section (used by ``benchmarks/regenerate_docs.py``)."""

from __future__ import annotations

from envforge.bench.bench_report import (
    CEILING_FACTOR,
    JUDGED_POLICY,
    TARGET_RATIO,
    BenchReport,
    fmt_sps,
)
from envforge.bench.ceiling import limits


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def sps_table(report: BenchReport) -> list[str]:
    batches = sorted({m.batch for m in report.measurements})
    lines = [
        _row(["implementation", "policy", *(f"B={b}" for b in batches)]),
        _row(["---", "---", *("---:" for _ in batches)]),
    ]
    for impl, _, policy in report.implementations():
        by_batch = {m.batch: m for m in report.series(impl, policy)}
        lines.append(
            _row(
                [
                    impl,
                    policy,
                    *(fmt_sps(by_batch[b].sps) if b in by_batch else "" for b in batches),
                ]
            )
        )
    return lines


def summary_table(report: BenchReport) -> list[str]:
    lines = [
        _row(
            [
                "implementation",
                "policy",
                "best SPS (batch)",
                "x reference",
                "per CPU-second",
                "x reference per CPU-s",
                "ceiling (bound)",
                "of ceiling",
                "compile s",
                "ratio target",
                "ceiling target",
            ]
        ),
        _row(["---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---", "---"]),
    ]

    def verdict(flag: bool | None) -> str:
        return "" if flag is None else ("met" if flag else "**missed**")

    for s in report.summaries():
        lines.append(
            _row(
                [
                    s.implementation,
                    s.policy,
                    f"{fmt_sps(s.best_sps)} ({s.best_batch})",
                    f"{s.ratio_to_reference:.3g}x" if s.ratio_to_reference else "-",
                    fmt_sps(s.best_cpu_sps),
                    f"{s.cpu_ratio_to_reference:.3g}x" if s.cpu_ratio_to_reference else "-",
                    f"{fmt_sps(s.ceiling_sps)} ({s.ceiling_bound})" if s.ceiling_sps else "-",
                    f"{100 * s.fraction_of_ceiling:.3g}%" if s.fraction_of_ceiling else "-",
                    f"{s.compile_s:.2f}" if s.compile_s is not None else "-",
                    verdict(s.meets_ratio_target),
                    verdict(s.meets_ceiling_target),
                ]
            )
        )
    return lines


def separate_rows(report: BenchReport) -> list[str]:
    """A line per series merged in from another run (``regenerate_docs.py --targets/--port``):
    its own date, CPU, load and command, since the header above is the other rows'."""
    lines = []
    for impl, where in report.separately_measured():
        load = where.get("load_before") or []
        load_text = f"load average before {load[0]:.2f}" if load else "load not recorded"
        lines.append(
            f"The `{impl}` rows were measured separately, {where.get('date')} on "
            f"{where.get('cpu')} ({where.get('cores')} cores), {load_text}: "
            f"`{where.get('command')}`."
        )
    return [*lines, ""] if lines else []


def section(report: BenchReport, plot: str | None = None) -> str:
    m = report.machine
    cost = report.cost or {}
    target = TARGET_RATIO.get(report.reference_kind)
    lines = [
        f"## {report.env}",
        "",
        f"Reference `{report.reference}`; measured {report.date}; load average before the run "
        f"{m['load_before'][0]:.2f} / {m['load_before'][1]:.2f} / {m['load_before'][2]:.2f} "
        "(1 / 5 / 15 min).",
        "",
        "```bash",
        report.command,
        "```",
        "",
        *separate_rows(report),
        "Env steps per second (median of "
        f"{report.settings.get('repeats')} runs of at least {report.settings.get('min_run_s')} s, "
        "taken in rounds across each implementation's configurations; compile time excluded):",
        "",
        *sps_table(report),
        "",
        (
            f"Targets: a port at least {target:g}x its reference (best batch against the "
            "reference's best) and"
            if target is not None
            else f"Targets (no speed-up target for a {report.reference_kind} reference):"
        )
        + f" at least 1/{CEILING_FACTOR:g} of the estimated ceiling, judged "
        f"on the {JUDGED_POLICY}-action rows: the targets and the ceiling are the env's own "
        "(its state's bytes, its step's ops). The MLP rows run a policy in the same loop; their "
        "ratio and their share of a ceiling that adds the MLP's ops are shown, not judged.",
        "",
        *summary_table(report),
        "",
    ]
    if cost:
        lines += [
            f"Ceiling inputs: {limits(report.machine)}; "
            f"{cost['bytes_per_step']} bytes moved per env step "
            f"(state {cost['state_bytes']} B read and written, obs {cost['obs_bytes']} B), "
            f"{cost['ops_per_step']:.0f} ops per env step counted from the port's jaxpr "
            f"({cost['transcendentals']} transcendental; {cost.get('fma_pairs', 0):.0f} "
            "multiply-add pairs that can fuse), MLP policy "
            f"{cost['mlp_ops']:.0f} ops ({cost.get('mlp_fma_pairs', 0):.0f} pairs); the compute "
            "limit runs the ops not in a pair, and each pair as one, at half the matmul FLOP/s "
            "(which counts an FMA as two). "
            f"The compiled loop runs {cost.get('fused_instructions', 0)} HLO operations per env "
            "step inside its fused loops (parameters, constants and broadcasts not counted): "
            "above the jaxpr's op count, XLA recomputes shared work in each fusion that reads "
            "it rather than storing it once.",
            "",
        ]
    if report.skipped:
        lines += [f"Not measured: {s}" for s in report.skipped] + [""]
    if plot:
        lines += [f"![SPS vs batch size, {report.env}]({plot})", ""]
    return "\n".join(lines)
