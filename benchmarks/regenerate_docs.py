"""Regenerate docs/BENCHMARKS.md (and its plots and JSON) by running `envforge bench`.

    .venv/bin/python benchmarks/regenerate_docs.py                 # pong and cartpole, full
    .venv/bin/python benchmarks/regenerate_docs.py --envs pong --quick
    # re-measure only some rows and merge them into docs/bench/<env>.json (no Markdown):
    .venv/bin/python benchmarks/regenerate_docs.py --envs uno --targets rust --quick
    .venv/bin/python benchmarks/regenerate_docs.py --envs halfcheetah \
        --port generated/halfcheetah/brax --quick --quick-batch 1,16 --policy random \
        --resets fresh --steps-per-call 64

Never edit docs/BENCHMARKS.md by hand: every number in it comes from this script's run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
from pathlib import Path

from envforge.bench.bench_report import BenchReport
from envforge.bench.markdown import section
from envforge.bench.measure import BenchSettings
from envforge.bench.suite import find_ports, run_bench
from envforge.bench.train_table import load_results, training_section
from envforge.resolve import candidate_port
from envforge.spec_lookup import spec_for_name

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def machine_line(reports: list[BenchReport]) -> str:
    """The CPU each env was measured on (runs re-rendered from JSON, and rows merged in by
    --targets/--port, may come from different machines of this kind: say which ran where)."""
    first = reports[0].machine
    cpus: dict[str, list[str]] = {}
    for r in reports:
        cpus.setdefault(r.machine["cpu"], []).append(r.env)
        for impl, where in r.separately_measured():  # rows merged in from another run
            cpus.setdefault(where.get("cpu") or "?", []).append(f"{r.env} `{impl}`")
    where = (
        first["cpu"]
        if len(cpus) == 1
        else "; ".join(f"{cpu} for {', '.join(envs)}" for cpu, envs in cpus.items())
    )
    system = first.get("system") or "kernel and Python not recorded in the JSON"
    return f"{where}, {first['cores']} cores, {first['memory_gib']} GiB RAM, {system}."


def settings_from(args: argparse.Namespace) -> tuple[BenchSettings, str]:
    """The settings asked for, and the `envforge bench` flags that give the same."""
    quick_batch = tuple(int(b) for b in args.quick_batch.split(","))
    settings = (
        BenchSettings(batch_sizes=quick_batch, repeats=3, min_run_s=0.1)
        if args.quick
        else BenchSettings()
    )
    flags = f" --batch {args.quick_batch} --repeats 3 --min-run 0.1" if args.quick else ""
    if args.policy:
        settings = dataclasses.replace(settings, policies=tuple(args.policy.split(",")))
        flags += f" --policy {args.policy}"
    if args.resets:
        settings = dataclasses.replace(settings, reset_modes=tuple(args.resets.split(",")))
        flags += f" --resets {args.resets}"
    if args.steps_per_call:
        settings = dataclasses.replace(settings, steps_per_call=args.steps_per_call)
        flags += f" --steps-per-call {args.steps_per_call}"
    return settings, flags


def refresh_rows(
    env: str, args: argparse.Namespace, settings: BenchSettings, docs: Path
) -> BenchReport:
    """Measure only the rows asked for (``--targets``, ``--port``) and merge them into the
    env's recorded docs/bench/<env>.json, every other row left as recorded."""
    spec = spec_for_name(env)
    recorded_path = docs / "bench" / f"{env}.json"
    if not recorded_path.exists():
        raise SystemExit(f"{recorded_path} does not exist: run a full regenerate of {env} first")
    recorded = BenchReport.from_dict(json.loads(recorded_path.read_text()))
    wanted = [t.strip() for t in (args.targets or "").split(",") if t.strip()]
    labels = [t for t in wanted if t != "reference"]
    ports = find_ports(spec, labels) if labels else []
    missing = sorted(set(labels) - {label for label, _ in ports})
    if missing:
        raise SystemExit(f"{env}: no port {', '.join(missing)} (see generated/{env}/)")
    if args.port:
        _, path = candidate_port(spec, args.port, None)
        ports.append((args.label or path.name, path))
    report = run_bench(
        spec,
        settings,
        ports,
        command="python benchmarks/regenerate_docs.py " + " ".join(sys.argv[1:]),
        progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True),
        reference="reference" in wanted,
        need_ports=False,
    )
    merged = recorded.merged(report)
    merged.plot(str(docs / "img" / f"bench-{env}.png"))
    recorded_path.write_text(json.dumps(merged.to_dict(), indent=2))
    print(f"merged {len(report.measurements)} rows into {recorded_path}", file=sys.stderr)
    return merged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="pong,cartpole")
    parser.add_argument("--quick", action="store_true", help="fewer batch sizes and repeats")
    parser.add_argument(
        "--from-json",
        action="store_true",
        help="re-render from docs/bench/<env>.json of an earlier run (no measuring)",
    )
    parser.add_argument(
        "--quick-batch",
        default="1,1024,65536",
        help="with --quick: the batch sizes (a port whose largest batch takes too long: 1,1024)",
    )
    parser.add_argument(
        "--out", default=str(DOCS / "BENCHMARKS.md"), help="where to write the Markdown"
    )
    parser.add_argument(
        "--targets",
        help="re-measure only these rows (port labels as in generated/<env>/, e.g. jax,rust,"
        " and/or 'reference') and merge them into docs/bench/<env>.json; the other rows stay "
        "as recorded, and docs/BENCHMARKS.md is not rewritten (re-render with --from-json)",
    )
    parser.add_argument(
        "--port",
        help="measure this one port folder (an extra or candidate port) and merge its rows "
        "into docs/bench/<env>.json as --targets does (one env only)",
    )
    parser.add_argument("--label", help="with --port: its rows' label (default: folder name)")
    parser.add_argument("--policy", help="random, mlp or random,mlp (default both)")
    parser.add_argument("--resets", help="JAX auto-reset: fresh, first or fresh,first")
    parser.add_argument("--steps-per-call", type=int, help="env steps per jitted JAX call")
    parser.add_argument(
        "--docs", default=str(DOCS), help="with --targets/--port: the docs folder to merge into"
    )
    args = parser.parse_args()
    settings, flags = settings_from(args)
    if args.port and "," in args.envs:
        parser.error("--port measures one env's port: give one env with --envs")
    if (args.targets or args.port) and args.from_json:
        parser.error("--targets/--port measure; --from-json does not")
    if args.targets or args.port:
        docs = Path(args.docs)
        (docs / "img").mkdir(parents=True, exist_ok=True)
        for env in args.envs.split(","):
            refresh_rows(env, args, settings, docs)
        print("docs/BENCHMARKS.md not rewritten: re-render with --from-json", file=sys.stderr)
        return 0
    (DOCS / "img").mkdir(parents=True, exist_ok=True)
    (DOCS / "bench").mkdir(parents=True, exist_ok=True)
    sections = []
    load_before = load()
    reports = []
    for env in args.envs.split(","):
        spec = spec_for_name(env)
        what = "rendering" if args.from_json else "benchmarking"
        print(f"{what} {env} (load {load()})", file=sys.stderr, flush=True)
        command = f"envforge bench {env}{flags} --plot docs/img/bench-{env}.png"
        if args.from_json:
            report = BenchReport.from_dict(json.loads((DOCS / "bench" / f"{env}.json").read_text()))
            sections.append(section(report, f"img/bench-{env}.png"))
            reports.append(report)
            continue
        report = run_bench(
            spec,
            settings,
            find_ports(spec, None),
            command=command,
            progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True),
        )
        report.plot(str(DOCS / "img" / f"bench-{env}.png"))
        (DOCS / "bench" / f"{env}.json").write_text(json.dumps(report.to_dict(), indent=2))
        sections.append(section(report, f"img/bench-{env}.png"))
        reports.append(report)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_line = f"at the start: {load_before}; at the end: {load()}"
    if args.from_json:  # the run's own date and load, not this re-rendering's
        now = f"{reports[0].date} (re-rendered from its JSON)"
        load_line = "at the start of each env's run: " + ", ".join(
            f"{r.env} {r.machine['load_before'][0]:.2f}" for r in reports
        )
    header = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/regenerate_docs.py` on "
        f"{now}; do not edit by hand (re-run the script). Raw numbers: `docs/bench/<env>.json`. "
        "One port's rows can be measured again without the rest (`--targets jax,rust`, "
        "`--targets reference`, or `--port PATH` for an extra or candidate port): they replace "
        "that port's rows in the env's JSON, and its section names their own date, CPU, load "
        "and command.",
        "",
        "The hand-written JAX ports run with their speed layer on (`envforge/speed_layer.py`); "
        "what it gains, measured on and off side by side, is in `docs/SPEED_LAYER.md`.",
        "",
        f"Machine: {machine_line(reports)} "
        "The ceiling's inputs, copy bandwidth and float32 matmul FLOP/s, are measured before "
        "and after each env's run and the better of the two is used (they are listed under "
        "each env: on this shared VM a single measurement has ranged over 2x the same day). "
        f"Load average (1 / 5 / 15 min) {load_line}. "
        "The machine is shared with other work, so a load above the core count means the "
        "numbers below are lower than a quiet machine would give.",
        "",
        "How it is measured: each implementation runs in its own process, one at a time. Its "
        "configurations (batch size, policy, reset variant) are set up first and then timed in "
        "rounds, one run of each per round, so a burst of load from other work spoils one run of "
        "several configurations (the medians discard it) rather than every run of one. The C "
        "harness is started once per run for this (each start builds its envs and calibrates "
        "before the timed run). JAX "
        "ports run as one jitted `lax.scan` over steps of the vmapped step with actions drawn "
        "inside the scan; an ended episode is replaced by a fresh reset computed for every env "
        "on every step (`where(done, reset(key), next)`, gymnax's auto-reset: the `jax port` "
        "rows) or by the env's own first state (Brax's AutoResetWrapper, which skips the reset's "
        "work: the `first-state resets` rows). Compile time is reported separately. The C "
        "reference runs in a generated C harness (a plain single-threaded loop over the batch, "
        "built with the C backend's fast flags) that times itself. Python references are "
        "stepped through a list of real env objects with auto-reset. Rust ports are stepped "
        "from Python one `EnvBatch.step` per batch (rayon threads across envs, GIL released), "
        "random actions and reset seeds cycling through 16 pre-drawn arrays; after each step "
        "`EnvBatch.reset_where` resets the envs whose episode ended and the batch is observed "
        "again, so the reset rows' observations are their new episodes' (rows measured before "
        "2026-12-03 skipped that observe; docs/RUST.md); a port without that optional method "
        "keeps stepping them, noted on its rows. `mlp` puts a 64-unit tanh "
        "MLP (argmax) in the loop on every side: in C in the C harness, in numpy for Python "
        "references, inside the scan for JAX ports, and as one jitted XLA call per step on "
        "the observations for Rust ports (as a training loop with a JAX learner acts). Ratios compare each implementation's best "
        "batch with the reference's best; `per CPU-second` divides by process CPU time (all "
        "threads), so it measures per-core efficiency and is little disturbed by other load. "
        "The ceiling is min(bandwidth / bytes per step, (matmul FLOP/s / 2) / slots per step), "
        "a slot being one op, or one multiply-add pair that can fuse (matmul FLOP/s counts an "
        "FMA as two ops; before 2026-12-01 the ceiling divided it by all ops, as if every op "
        "were half of an FMA, which doubled the compute limit of a step of compares and "
        "selects). The bandwidth is the copy bandwidth measured at the footprint of the "
        "row's batch (batch x bytes per step): a batch whose arrays fit in cache is held to "
        "the cache's bandwidth (the `cache` bound), one that does not to DRAM's (`memory`); "
        "until 2026-12-01 every batch was held to DRAM's, which let a cache-resident batch "
        "look closer to its ceiling than it was. No GPU "
        "was available to this run, so there are no GPU numbers.",
        "",
    ]
    # the PPO table: benchmarks/train_speed.py's docs/bench/train-<env>.json, as last measured
    training = training_section(load_results(DOCS / "bench"))
    Path(args.out).write_text("\n".join(header + sections + ([training] if training else [])))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
