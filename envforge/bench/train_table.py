"""The "Training speed (PPO)" table: ``benchmarks/train_speed.py``'s results as Markdown.

Each result is one env's ``docs/bench/train-<env>.json``: PPO env steps/s on its best port and
on its reference, measured side by side in one run. The script prints the table;
``benchmarks/regenerate_docs.py`` puts it, with how it was measured, into docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envforge.bench.bench_report import fmt_sps

HEADER = (
    "| env | port (PPO) | reference (PPO) | envs x steps | port steps/s | reference steps/s "
    "| x reference | per CPU-second | rollout only | port: env / policy / update "
    "| reference: env / policy / update | target | CPU (load) |"
)


def split_cell(side: dict[str, Any]) -> str:
    """A side's shares of training time, env / policy / update (``-`` where not measured)."""
    split = side.get("split")
    if not split:
        return "-"
    share = split["share"]
    return " / ".join(f"{100 * share[p]:.0f}%" for p in ("env", "policy", "update"))


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def met_target(r: dict[str, Any]) -> bool:
    """The target counts as met only if both the wall and the per-CPU-second ratio reach it: on
    a loaded machine the wall ratio favours the side that happened to get more CPU."""
    return min(r["speedup"], r["speedup_per_cpu_s"]) >= r["target_x"]


def training_row(r: dict[str, Any]) -> str:
    port, ref, ppo = r["port"], r["reference_side"], r["ppo"]
    met = "met" if met_target(r) else "**missed**"
    machine = r["machine"]
    cells = [
        r["env"],
        f"{port['implementation']}, {port['trainer']}",
        f"{ref['implementation']}, {ref['trainer']}",
        f"{ppo['num_envs']} x {ppo['num_steps']}",
        fmt_sps(port["steps_per_s"]),
        fmt_sps(ref["steps_per_s"]),
        f"**{_x(r['speedup'])}**",
        _x(r["speedup_per_cpu_s"]),
        _x(r.get("rollout_speedup")),
        split_cell(port),
        split_cell(ref),
        f">= {r['target_x']:g}x: {met}",
        f"{machine['cpu']} ({machine['load_before'][0]:.1f})",
    ]
    return "| " + " | ".join(cells) + " |"


def training_table(results: list[dict[str, Any]]) -> list[str]:
    align = (
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    )
    return [HEADER, align, *(training_row(r) for r in results)]


def load_results(folder: Path) -> list[dict[str, Any]]:
    """Every ``train-<env>[-<batch>].json`` in ``folder``, by env, then batch size."""
    results = [json.loads(p.read_text()) for p in folder.glob("train-*.json")]
    return sorted(results, key=lambda r: (r["env"], r["ppo"]["num_envs"], r["ppo"]["num_steps"]))


def training_section(results: list[dict[str, Any]]) -> str:
    """The section of docs/BENCHMARKS.md (empty when no env was measured)."""
    if not results:
        return ""
    ppo = results[0]["ppo"]
    lines = [
        "## Training speed (PPO)",
        "",
        "Measured by `python benchmarks/train_speed.py` (raw numbers: "
        '`docs/bench/train-<env>.json`; how it is measured: docs/BENCH.md, "Training '
        "speed\"). Env steps per second of PPO *training* on the env's fastest port and on its "
        "reference, one after the other in one run, with the same network (actor and critic "
        f"MLPs {'x'.join(str(h) for h in ppo['hidden'])}), batch (num_envs x num_steps: the "
        "spec's `[l4]`, or 16 x 128, and where more rows are shown, larger ones: 256 x 32, "
        f"1024 x 32), {ppo['update_epochs']} epochs x {ppo['num_minibatches']} minibatches "
        "and one seed. `per CPU-second` divides each side by its CPU time; `rollout only` is "
        "the ratio of acting and stepping alone; `env / policy / update` is each side's "
        "training time split into env stepping, policy inference and the update. The target (50x where the env dominates, "
        "CartPole and pong, 10x elsewhere) counts as met only where both `x reference` and "
        "`per CPU-second` reach it. Where the targets are missed and why: docs/L4.md, "
        '"Training speed per env".',
        "",
        *training_table(results),
        "",
        measured_line(results),
        "",
    ]
    return "\n".join(lines)


def measured_line(results: list[dict[str, Any]]) -> str:
    """When the rows were measured and the commands that measure them again."""
    dates = sorted(r["date"] for r in results)
    commands = sorted({f"python {r['command']}" for r in results}, key=lambda c: (len(c), c))
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return f"Measured {when} by " + ", ".join(f"`{c}`" for c in commands) + "."
