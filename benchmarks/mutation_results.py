"""Run the mutation campaigns (their JSON) and render docs/MUTATE_RESULTS.md from them.

    .venv/bin/python benchmarks/mutation_results.py                       # pong and cartpole, JAX and Rust
    .venv/bin/python benchmarks/mutation_results.py --envs pong --targets rust --max 20 --scale 0.2
    .venv/bin/python benchmarks/mutation_results.py --envs chip8 --targets rust --max 36 \
        --scale 0.2 --seed-sweep 65536 --jobs 1       # chip8: a fixed sweep (the plan's is too big)
    .venv/bin/python benchmarks/mutation_results.py --envs halfcheetah --targets jax --max 20 \
        --scale 0.3 --jobs 1 --no-differential    # MJX: jaxlib's batched Cholesky hung in-process
    .venv/bin/python benchmarks/mutation_results.py --render-only         # the page from the JSONs
    .venv/bin/python benchmarks/mutation_results.py --envs pong --render  # a campaign, then the page
    .venv/bin/python benchmarks/mutation_results.py --envs uno --rerun clip:294:1 \
        --time-limit 3600 --why "its full differential outlasted the campaign's worker limit"
    .venv/bin/python benchmarks/mutation_results.py --port tests/ports/taxi_ownkey \
        --rerun constant:155:1 --time-limit 1200 --why "..."   # an own-key campaign's mutant

Each campaign is `envforge mutate <env> --target T --max N --scale S [--seed-sweep K --jobs J]`;
its JSON goes to
docs/mutate/ (`<env>.json` for the JAX port, `<env>-<target>.json` for another). A campaign
(or `--rerun`) writes only its JSON: the page (docs/MUTATE_RESULTS.md, never edited by hand)
is rewritten by `--render-only`, or after the campaign with `--render`. Until 2026-12-03 every
campaign rewrote the page, so campaigns run side by side overwrote each other's render.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

from envforge.mutate.campaign import run_campaign
from envforge.mutate.rerun import put_back
from envforge.mutate.workspace import resolve_target
from envforge.spec import load_spec
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import parse_seed_sweep

ROOT = Path(__file__).resolve().parents[1]
TIME_LIMIT_S = 900.0
"""`envforge mutate --time-limit`'s default."""
OUT = ROOT / "docs" / "mutate"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def sweep_line(options: dict[str, Any]) -> list[str]:
    """The L1 reset sweep every mutant got, and how the campaign chose it (replicate mode)."""
    plan = options.get("seed_sweep_plan") or {}
    if not plan:
        return []
    line = f"L1 reset sweep of every mutant: seeds 0..{options['seed_sweep'] - 1}"
    if "seconds_per_seed" in plan:
        rate = 1 / plan["seconds_per_seed"] / 1e6 if plan["seconds_per_seed"] else float("inf")
        line += (
            f" (the unmutated port's digests at {rate:.0f} M seeds/s, budget "
            f"{plan['budget_s']:.0f} s; the reference's digests of "
            f"{plan.get('reference_kept', 0)} seeds computed or kept beforehand)"
        )
    return ["", line + "."]


def measured_line(data: dict[str, Any]) -> list[str]:
    if "measured" not in data:
        return []
    load = " / ".join(f"{x:.2f}" for x in data["load_before"])
    return [f"Run {data['measured']}, load average at the start {load}.", ""]


def localized_text(data: dict[str, Any]) -> str:
    """The localization sentence; campaigns before crash sites counted give field and line."""
    loc, targets = data["localization"], data["targets"]
    if "localized" not in loc:
        met = "met" if targets["field_localization_met"] else "missed"
        return (
            f"**field-localized {pct(loc['field'])}** of kills (target 80%: {met}); "
            f"line-localized {pct(loc['line'])}."
        )
    met = "met" if targets["localization_met"] else "missed"
    handlers = data.get("handlers") or {}
    if handlers.get("declared"):  # campaigns before the handler measure have no such key
        n, named = handlers["kills_in_handlers"], handlers["handler_localized"]
        mean, first = handlers.get("mean_named"), handlers.get("first_named_localized")
        return (
            f"**localized {pct(loc['localized'])}** of kills (target 80%: {met}), by handler: "
            f"of the {n} kills of mutants in an opcode handler, the finding named that handler "
            f"for {named} ({pct(loc.get('handler'))}"
            + (f"; a finding named {mean:.1f} handlers on average" if mean is not None else "")
            + (f"; named it first for {first}" if first is not None else "")
            + "); the other kills by field or crash site. Field-localized "
            f"{pct(loc['field'])}, crash site in the mutated handler {pct(loc['site'])}, "
            f"line-localized {pct(loc['line'])}."
        )
    draw = f", the draw it changed {pct(loc['draw'])}" if "draw" in loc else ""
    return (
        f"**localized {pct(loc['localized'])}** of kills (target 80%: {met}): "
        f"field-localized {pct(loc['field'])}, crash site in the mutated handler "
        f"{pct(loc['site'])}{draw}; line-localized {pct(loc['line'])}."
    )


def is_localized(m: dict[str, Any]) -> bool:
    """The headline judgement of one kill (``report.localized``): by handler when the mutated
    line lies in one, else by field, crash site or the draw an ``rng.tape`` finding names
    (older JSONs: field or crash site)."""
    if m.get("mutated_handlers"):
        return bool(m.get("handler_localized"))
    return bool(m["field_localized"] or m.get("site_localized") or m.get("draw_localized"))


def handler_lines(killed: list[dict[str, Any]]) -> list[str]:
    """Kills of mutants in a handler whose finding did not name it, with what it named."""
    missed = [m for m in killed if m.get("mutated_handlers") and not m.get("handler_localized")]
    if not missed:
        return []
    lines = ["", "Kills of mutants in an opcode handler whose finding did not name it:", ""]
    for m in missed:
        named = ", ".join(m.get("named_handlers") or []) or "no handler"
        lines.append(
            f"- `{m['id']}` {m['description']} (in {', '.join(m['mutated_handlers'])}): "
            f"L{m['level']} `{m['check']}` named {named}; fields {m['finding_fields'] or 'none'}"
        )
        if m.get("finding_message"):
            lines.append(f"  - said: {m['finding_message'][:300]}")
    return lines


def section(data: dict[str, Any], command: str) -> list[str]:
    counts = data["status_counts"]
    port = f"{data.get('target', 'jax')} port" if data["side"] == "port" else data["side"]
    if data.get("port"):  # a campaign on a port folder of its own (--port), not the shipped one
        port += f" {data['port']}"
    lines = [
        f"## {data['env']} ({port}: {', '.join(data['files'])})",
        "",
        "```bash",
        command,
        "```",
        "",
        *measured_line(data),
        f"{data['run']} mutants run (sampled across operators from {data['generated']} generated; "
        f"{data['stillborn']} stillborn set aside"
        + (
            f"; {data['exempt']} on lines marked `envforge: no-mutate` not generated"
            if data.get("exempt")
            else ""
        )
        + f") in {data['wall_s'] / 60:.0f} min: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + ".",
        *sweep_line(data["options"]),
        "",
        f"**Kill rate {pct(data['kill_rate'])}** of {data['non_equivalent']} non-equivalent "
        f"(target 95%: {'met' if data['targets']['kill_rate_met'] else 'missed'}); "
        + localized_text(data),
        "",
        "| level | killed here | killed through | cumulative kill rate |",
        "|---|---:|---:|---:|",
    ]
    for row in data["per_level"]:
        lines.append(
            f"| L{row['level']} | {row['killed_here']} | {row['killed_through']} | "
            f"{pct(row['cumulative_kill_rate'])} |"
        )
    statuses = ("killed", "survived", "equivalent", "stillborn", "timeout", "error")
    lines += ["", "| operator | " + " | ".join(statuses) + " |", "|---" + "|---:" * 6 + "|"]
    for op, c in data["per_operator"].items():
        lines.append(f"| {op} | " + " | ".join(str(c.get(s, 0)) for s in statuses) + " |")
    lines.append("")
    for m in data["mutants"]:
        if m["status"] in ("killed", "stillborn"):
            continue
        lines.append(f"- **{m['status']}** `{m['id']}` {m['description']}")
        if m["equivalence"]:
            lines.append(f"  - reason: {m['equivalence']}")
        if m["witness"]:
            lines.append(f"  - witness: `{json.dumps(m['witness'])[:300]}`")
        if m["error"]:
            lines.append(f"  - {m['error'][:300]}")
        if m["diff"]:
            lines += [
                "",
                "  ```diff",
                *("  " + d for d in m["diff"].rstrip().splitlines()),
                "  ```",
            ]
    for again in data.get("reruns", []):
        lines += [
            "",
            f"Re-run after the campaign, apart from it ({again['when']}, worker limit "
            f"{again['time_limit_s']:.0f} s"
            + (f", {again['wall_s'] / 60:.0f} min" if "wall_s" in again else "")
            + f"): {again['reason']}.",
            "",
        ]
        for m in (m for m in data["mutants"] if m["id"] in again["ids"]):
            was = m.get("rerun") or {}
            lines.append(
                f"- `{m['id']}`: in the campaign {was.get('campaign_status')} after "
                f"{was.get('campaign_wall_s', 0):.0f} s; re-run: {m['status']}"
                + (f" ({m['equivalence']})" if m.get("equivalence") else "")
                + f" in {m['wall_s']:.0f} s"
            )
    retimed = [m for m in data["mutants"] if m.get("retimed_from")]
    if retimed:
        lines += [
            "",
            "Re-run after a driver call timed out (4x the call limit; a hang times out again):",
            "",
        ]
        for m in retimed:
            fate = f"L{m['level']} `{m['check']}`" if m["status"] == "killed" else m["status"]
            lines.append(f"- `{m['id']}`: first limit {m['retimed_from']:.0f} s; re-run: {fate}")
    killed = [m for m in data["mutants"] if m["status"] == "killed"]
    by_site = [m for m in killed if m.get("site_localized") and not m["field_localized"]]
    if by_site:
        lines += ["", "Kills localized by where the port crashed (no field to name):", ""]
        for m in by_site:
            lines.append(
                f"- `{m['id']}` {m['description']}: L{m['level']} `{m['check']}` raised in "
                f"`{m['handler']}`, the handler the mutant changes"
            )
    lines += handler_lines(killed)
    unlocalized = [m for m in killed if not m.get("mutated_handlers") and not is_localized(m)]
    if unlocalized:
        declared = (data.get("handlers") or {}).get("declared")
        lines += [
            "",
            ("Kills of mutants in no opcode handler whose " if declared else "Kills whose ")
            + "finding named neither a field the mutant changes nor a crash in the mutated "
            "handler:",
            "",
        ]
        for m in unlocalized:
            lines.append(
                f"- `{m['id']}` {m['description']}: L{m['level']} `{m['check']}` named "
                f"{m['finding_fields'] or 'no field'}"
                + (f" (raised in `{m['handler']}`)" if m.get("handler") else "")
                + f"; the mutant changes {m['affected'] or 'nothing found'}"
            )
    return lines + [""]


def campaign_path(env: str, kind: str) -> Path:
    """Where a campaign's JSON lives: ``<env>.json`` for the JAX port, else ``<env>-<kind>.json``."""
    return OUT / (f"{env}.json" if kind == "jax" else f"{env}-{kind}.json")


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def print_progress(done: int, total: int, run: Any) -> None:
    print(
        f"  {done}/{total} {run.job.mutant.id} {run.wall_s:.0f} s: {said(run)}",
        file=sys.stderr,
        flush=True,
    )


def said(run: Any) -> str:
    """One mutant's first finding (level, check, fields) or error, for the progress log: what
    a campaign stopped before its end still tells."""
    finding = run.first_finding
    if finding:
        return f"L{finding.get('level')} {finding.get('check')} {finding.get('fields')}"
    return "timed out" if run.timed_out else (run.error[:120] or "no finding")


def port_label(folder: Path, env: str) -> str:
    """A ``--port`` folder's campaign label: ``tests/ports/taxi_ownkey`` gives ``ownkey``."""
    return folder.name.removeprefix(f"{env}_")


def rerun_campaigns(args: argparse.Namespace) -> list[tuple[Path, Any]]:
    """(JSON path, target) of each campaign ``--rerun`` names: the ``--port`` folder's, with
    the spec beside it (before, ``--port`` was ignored here and the shipped port's campaign
    was looked up), else each ``--envs`` x ``--targets`` shipped port's."""
    if args.port:
        spec = load_spec(Path(args.port) / "env.toml")
        path = campaign_path(spec.name, port_label(Path(args.port), spec.name))
        return [(path, resolve_target(spec, "port", "jax", args.port))]
    return [
        (campaign_path(e, t), resolve_target(spec_for_name(e), "port", t, None))
        for e in args.envs.split(",")
        for t in args.targets.split(",")
    ]


def rerun(args: argparse.Namespace) -> None:
    """Run ``--rerun``'s mutants of each recorded campaign (``--port``'s, or each ``--envs`` x
    ``--targets``) again, alone, with the options the campaign recorded, and put their
    outcomes back."""
    if not args.why:
        sys.exit("--rerun needs --why: the reason is recorded beside the outcome")
    ids = args.rerun.split(",")
    for path, target in rerun_campaigns(args):
        campaign = json.loads(path.read_text())
        unknown = sorted(set(ids) - {m["id"] for m in campaign["mutants"]})
        if unknown:  # before, such ids selected nothing and the JSON got an empty re-run entry
            sys.exit(
                f"--rerun: {', '.join(unknown)} not in {path.name} (ids look like src/x.rs:op:L:k)"
            )
        recorded = campaign["options"]
        options = VerifyOptions(
            **{k: recorded[k] for k in VerifyOptions.__dataclass_fields__ if k in recorded}
        )
        print(f"re-running {ids} of {path.name} alone", file=sys.stderr, flush=True)
        again = run_campaign(
            target,
            list(campaign["levels"]),
            options,
            parallel=args.jobs or 1,
            time_limit_s=args.time_limit,
            only=ids,
            differential="--no-differential" not in campaign.get("command", ""),
            progress=print_progress,
        )
        data = put_back(campaign, again, args.why, utc_now(), args.time_limit)
        path.write_text(json.dumps(data, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="pong,cartpole")
    parser.add_argument("--targets", default="jax,rust")
    parser.add_argument("--max", type=int, default=60)
    parser.add_argument("--scale", type=float, default=1.0)  # the verifier's default effort
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sample-order",
        choices=("sorted", "shuffled"),
        default="sorted",
        help="with --max below the operator count: operators take turns by name (sorted, "
        "what recorded campaigns picked) or in an order shuffled by --seed, as `envforge mutate`",
    )
    parser.add_argument(
        "--seed-sweep",
        default=None,
        help="L1 reset sweep of every mutant (N, 2^k or full), as `envforge mutate --seed-sweep`; "
        "unset, the campaign plans one",
    )
    parser.add_argument("--jobs", type=int, default=0, help="mutants at once (0: one per core)")
    parser.add_argument(
        "--no-differential",
        action="store_true",
        help="skip the differential test (no triage or localization), as `envforge mutate`",
    )
    parser.add_argument("--render-only", action="store_true", help="rewrite the page only")
    parser.add_argument(
        "--render",
        action="store_true",
        help="after the campaign (or --rerun), rewrite docs/MUTATE_RESULTS.md too; without it "
        "a campaign writes only its docs/mutate/<name>.json",
    )
    parser.add_argument(
        "--rerun",
        default=None,
        help="mutant ids (comma-separated) of the env's recorded campaign to run again apart "
        "from it, "
        "with the campaign's options and --time-limit; their outcomes replace the recorded ones",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=TIME_LIMIT_S,
        help="seconds one mutant's verify may take (a campaign's, or --rerun's), as `envforge mutate`",
    )
    parser.add_argument("--why", default="", help="with --rerun: the reason, recorded")
    parser.add_argument(
        "--port",
        default=None,
        help="a JAX port folder with its own env.toml (tests/ports/taxi_ownkey): its campaign, "
        "with that spec, goes to docs/mutate/<env>-<folder name less '<env>_'>.json (with "
        "--rerun: that campaign's mutants are re-run)",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.rerun:
        rerun(args)
        return render_page() if args.render else 0
    campaigns = [] if args.render_only else args.envs.split(",")
    sweep = None if args.seed_sweep is None else parse_seed_sweep(args.seed_sweep)
    targets = args.targets.split(",")
    if args.port and not args.render_only:
        folder = Path(args.port)
        campaigns, targets = [load_spec(folder / "env.toml").name], ["jax"]
    for env, kind in ((e, t) for e in campaigns for t in targets):
        spec = load_spec(folder / "env.toml") if args.port else spec_for_name(env)
        target = resolve_target(spec, "port", kind, args.port)
        print(f"mutating {env} ({kind} port)", file=sys.stderr, flush=True)
        started = os.getloadavg()
        report = run_campaign(
            target,
            [0, 1, 2, 3],
            VerifyOptions(seed=args.seed, scale=args.scale, seed_sweep=sweep),
            limit=args.max,
            seed=args.seed,
            parallel=args.jobs or os.cpu_count() or 1,
            time_limit_s=args.time_limit,
            differential=not args.no_differential,
            progress=print_progress,
            note=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True),
            sample_order=args.sample_order,
        )
        data = report.to_dict()
        flag = "" if kind == "jax" else f" --target {kind}"
        data["command"] = (
            f"envforge mutate {env}{flag} --max {args.max} --scale {args.scale} --seed {args.seed}"
            + ("" if args.seed_sweep is None else f" --seed-sweep {args.seed_sweep}")
            + (f" --jobs {args.jobs}" if args.jobs else "")
            + (" --no-differential" if args.no_differential else "")
            + (" --sample-order shuffled" if args.sample_order == "shuffled" else "")
            + (f" --time-limit {args.time_limit:g}" if args.time_limit != TIME_LIMIT_S else "")
        )
        data["target"] = kind
        data["measured"] = utc_now()
        data["load_before"] = list(started)
        label = kind
        if args.port:  # the spec beside the port: only this script can run it
            label = port_label(folder, env)
            data["command"] = (
                data["command"].replace(
                    f"envforge mutate {env}", "python benchmarks/mutation_results.py"
                )
                + f" --port {args.port}"
            )
            data["port"] = args.port
        campaign_path(env, label).write_text(json.dumps(data, indent=2))
        print(f"wrote {campaign_path(env, label)}", file=sys.stderr)
    if args.render_only or args.render:
        return render_page()
    print("docs/MUTATE_RESULTS.md not rewritten (--render-only renders it)", file=sys.stderr)
    return 0


def render_page() -> int:
    """docs/MUTATE_RESULTS.md from every docs/mutate/*.json."""
    now = utc_now()
    lines = [
        "# Mutation testing results",
        "",
        f"Written by `benchmarks/mutation_results.py` on {now} from `docs/mutate/*.json`; do not "
        "edit by hand. What the numbers mean: `docs/MUTATE.md`. Each campaign says when it ran "
        "and the load average (1/5/15 min) at its start.",
        "",
    ]
    for path in sorted(OUT.glob("*.json")):
        data = json.loads(path.read_text())
        lines += section(data, data.get("command", ""))
    (ROOT / "docs" / "MUTATE_RESULTS.md").write_text("\n".join(lines))
    print("wrote docs/MUTATE_RESULTS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
