"""`envforge bench`: steps per second of the reference and of every port, side by side."""

from __future__ import annotations

import json
import sys

import typer
from rich.console import Console

from envforge.bench.measure import BATCH_SIZES, BenchSettings
from envforge.bench.suite import find_ports, run_bench
from envforge.commands import options
from envforge.errors import BadInput
from envforge.resolve import candidate_port, resolve_spec
from envforge.sandbox.select import choose_sandbox, open_sandbox
from envforge.spec import bounds


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise BadInput(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise BadInput(f"{flag}: expected positive integers, got {text!r}")
    return values


def bench_command(
    env: options.EnvOrRef = None,
    ref: options.Ref = None,
    spec_path: options.Spec = None,
    target: list[str] = typer.Option(
        None, "--target", help="Port(s) to measure: jax, rust (default: every port found)."
    ),
    batch: str = typer.Option(
        ",".join(map(str, BATCH_SIZES)), "--batch", help="Batch sizes, comma-separated."
    ),
    policy: str = typer.Option("random,mlp", "--policy", help="random, mlp or both."),
    repeats: int = typer.Option(
        5,
        "--repeats",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Timed runs; the median is shown.",
    ),
    min_run: float = typer.Option(
        0.2, "--min-run", callback=bounds.option(bounds.SECONDS), help="Seconds per timed run."
    ),
    resets: str = typer.Option(
        "fresh,first", "--resets", help="JAX auto-reset: fresh (gymnax), first (Brax), or both."
    ),
    speed_layer: str = typer.Option(
        "on",
        "--speed-layer",
        help="JAX ports' speed layer (envforge/kit/speed_layer.py): on, off, or on,off side by side.",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Measure strict-float builds (no FMA) instead of fast ones."
    ),
    max_python_batch: int = typer.Option(
        4096,
        "--max-python-batch",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Largest batch for Python references.",
    ),
    steps_per_call: int = typer.Option(
        None,
        "--steps-per-call",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Env steps per jitted JAX call (default 65536, at least 16 scan steps); "
        "fewer for a slow port's large batches.",
    ),
    port: options.CandidatePort = None,
    plot: str = typer.Option(None, "--plot", help="Write a log-log PNG of SPS vs batch size."),
    as_json: options.Json = False,
    sandbox: options.Sandbox = "auto",
) -> None:
    """Measure env steps/s of the reference and its ports (compile time excluded)."""
    spec = resolve_spec(env, ref, spec_path, command="bench")
    policies = tuple(p.strip() for p in policy.split(",") if p.strip())
    if not policies or any(p not in ("random", "mlp") for p in policies):
        raise BadInput(f"--policy: expected random, mlp or random,mlp, got {policy!r}")
    reset_modes = tuple(r.strip() for r in resets.split(",") if r.strip())
    if not reset_modes or any(r not in ("fresh", "first") for r in reset_modes):
        raise BadInput(f"--resets: expected fresh, first or fresh,first, got {resets!r}")
    layers = tuple(x.strip() for x in speed_layer.split(",") if x.strip())
    if not layers or any(x not in ("on", "off") for x in layers):
        raise BadInput(f"--speed-layer: expected on, off or on,off, got {speed_layer!r}")
    settings = BenchSettings(
        batch_sizes=_ints(batch, "--batch"),
        repeats=repeats,
        min_run_s=min_run,
        policies=policies,
        strict_float=strict,
        max_python_batch=max_python_batch,
        reset_modes=reset_modes,
        steps_per_call=steps_per_call,
        speed_layers=tuple(dict.fromkeys(layers)),
    )
    ports = [candidate_port(spec, port, target)] if port else find_ports(spec, target or None)
    command = "envforge " + " ".join(sys.argv[1:]) if sys.argv[1:] else f"envforge bench {env}"
    console = Console(stderr=as_json, width=None if sys.stdout.isatty() else 160)
    choice = choose_sandbox(sandbox)
    opened = open_sandbox(choice.kind)
    console.print(choice.line(opened), highlight=False)
    with console.status(f"benchmarking {spec.name}") as status:
        report = run_bench(
            spec,
            settings,
            ports,
            command=command,
            progress=lambda msg: status.update(f"benchmarking {spec.name}: {msg}"),
            sandbox=opened,
        )
    if plot:
        report.plot(plot)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        report.render(console)
        if plot:
            console.print(f"plot: {plot}")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_command)
