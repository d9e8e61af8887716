"""Run a whole benchmark: the machine's limits, the reference, then every port, one at a time.

Each measurement job runs in its own spawned process, so a port's XLA flags, threads and
memory never leak into the next job, and jobs never overlap (they would steal each other's
cores). A port's jobs run inside the sandbox the user chose (``envforge/sandbox/jobs.py``; a
spawned process only under ``--sandbox none``): its steps/s are measured there, by the job,
and come back as plain data. The results are assembled into a :class:`BenchReport`.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from envforge.backends.recipe import STRICT_XLA_FLAGS
from envforge.bench.bench_report import BenchReport
from envforge.bench.measure import BenchSettings, Measurement
from envforge.errors import BadInput, DriverRaised, EnvforgeError
from envforge.sandbox.base import Sandbox
from envforge.sandbox.jobs import run_job as run_sandboxed_job
from envforge.spec import EnvSpec, project_roots
from envforge.targets import find_port_folders, load_ref, target_of_port
from envforge.untrusted.orphans import exit_with_parent

Progress = Callable[[str], None]
PORT_JOB_TIMEOUT_S = 3600.0
"""Limit on one port's sandboxed measurement, start to result."""


# ---- jobs (run in a child process; arguments and results are picklable) -------------------


def _job_machine() -> dict[str, Any]:
    from envforge.bench.ceiling import measure_machine

    return measure_machine().to_dict()


def _job_reference(spec: EnvSpec, settings: BenchSettings) -> dict[str, Any]:
    if spec.reference_kind == "c":
        from envforge.bench.c_loop import measure_c_loop

        path = spec.reference_path()
        assert path is not None
        rows = measure_c_loop(spec, path, settings)
    elif spec.reference_kind == "node":
        from envforge.bench.node_loop import measure_node_loop

        path = spec.reference_path()
        assert path is not None
        rows = measure_node_loop(spec, path, settings)
    elif spec.reference_kind == "pettingzoo":
        from envforge.bench.pettingzoo_loop import measure_pettingzoo

        rows = measure_pettingzoo(spec, settings)
    else:
        from envforge.bench.python_loop import measure_python

        rows = measure_python(spec, settings)
    return {"measurements": [m.to_dict() for m in rows]}


def _job_jax(spec: EnvSpec, port: str, settings: BenchSettings, label: str) -> dict[str, Any]:
    from envforge.bench.ceiling import fused_instruction_count, step_cost
    from envforge.bench.jax_loop import load_port, measure_jax

    module = load_port(spec, Path(port))
    cost = step_cost(spec, module, settings.hidden)
    cost.fused_instructions = fused_instruction_count(spec, module)
    rows = measure_jax(spec, Path(port), settings, label)
    return {"measurements": [m.to_dict() for m in rows], "cost": cost.to_dict()}


def _job_rust(spec: EnvSpec, port: str, settings: BenchSettings, label: str) -> dict[str, Any]:
    from envforge.bench.rust_loop import measure_rust

    rows = measure_rust(spec, Path(port), settings, label)
    return {"measurements": [m.to_dict() for m in rows]}


def _child(
    target: Callable[..., dict], args: tuple, env: dict[str, str], conn: Any, parent: int
) -> None:
    exit_with_parent(parent)  # a bench killed from outside leaves no job measuring on
    os.environ.update(env)  # before anything imports jax
    try:
        conn.send(("ok", target(*args)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent as a failed job
        conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))


def run_job(
    target: Callable[..., dict],
    args: tuple = (),
    env: dict[str, str] | None = None,
    side: str | None = None,
) -> dict[str, Any]:
    """``target(*args)`` in a spawned process. A job that drives a side's code (``side``: the
    port) and fails raises that side's DriverRaised (a verdict on the port, exit 1)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(target, args, env or {}, child, os.getpid()))
    proc.start()
    child.close()
    try:
        reply = parent.recv()
    except EOFError:
        reply = ("error", f"benchmark process died (exit code {proc.exitcode})", "")
    proc.join()
    if reply[0] != "ok":
        if side is not None:
            raise DriverRaised(side, target.__name__.strip("_"), reply[1], reply[2])
        raise EnvforgeError(f"benchmark job {target.__name__} failed: {reply[1]}\n{reply[2]}")
    result: dict[str, Any] = reply[1]
    return result


# ---- planning ---------------------------------------------------------------------------------


def find_ports(spec: EnvSpec, targets: list[str] | None) -> list[tuple[str, Path]]:
    """(label, path) of each port of this env that exists on disk: every folder of
    ``generated/<env>/`` a target recognises (``envforge/targets``; labelled by folder name,
    ``brax`` for ``generated/halfcheetah/brax``) and the spec's ``[port]`` entries; only the
    labels in ``targets``, in the order asked, when given."""
    roots = [*project_roots(), spec.root.parent.parent]
    found = dict(find_port_folders(spec.name, roots, spec.port))
    if not targets:
        return list(found.items())
    return [(label, found[label]) for label in targets if label in found]


def jax_env(settings: BenchSettings) -> dict[str, str]:
    return {"XLA_FLAGS": STRICT_XLA_FLAGS, "JAX_PLATFORMS": "cpu"} if settings.strict_float else {}


def run_bench(
    spec: EnvSpec,
    settings: BenchSettings,
    ports: list[tuple[str, Path]],
    command: str = "",
    progress: Progress | None = None,
    sandbox: Sandbox | None = None,
    reference: bool = True,
    need_ports: bool = True,
) -> BenchReport:
    """The reference (our own code: a spawned process; skipped when ``reference`` is False,
    for rows to merge into an earlier report) and each port (in ``sandbox``; a spawned
    process when it is None, ``--sandbox none``)."""

    def port_job(name: str, args: tuple, env: dict[str, str] | None = None) -> dict[str, Any]:
        if sandbox is None:  # --sandbox none: a plain spawned process
            return run_job(load_ref(name), args, env, side="port")
        # a DriverFailure is the port's: a verdict on it (exit 1), not bad input
        result: dict[str, Any] = run_sandboxed_job(
            sandbox,
            name,
            args,
            readable=(Path(args[1]),),
            env=env,
            timeout_s=PORT_JOB_TIMEOUT_S,
            what="bench",
            port=Path(args[1]),
        )
        if not isinstance(result, dict) or not isinstance(result.get("measurements"), list):
            raise EnvforgeError(f"benchmark of {args[3]} sent a result of no known form")
        return result

    def say(msg: str) -> None:
        if progress:
            progress(msg)

    if not ports and (need_ports or not reference):
        raise BadInput(f"no port of {spec.name} to benchmark (looked for generated/{spec.name}/*)")
    say("measuring memory bandwidth and peak FLOP/s")
    machine = run_job(_job_machine)
    report = BenchReport(
        env=spec.name,
        reference=spec.reference,
        settings=asdict(settings),
        machine=machine,
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        command=command,
    )
    if reference:
        say(f"reference {spec.reference}")
        ref = run_job(_job_reference, (spec, settings))
        report.measurements.extend(Measurement.from_dict(m) for m in ref["measurements"])
    for target, path in ports:
        label = f"{target} port" + (" (strict)" if settings.strict_float else "")
        kind = target_of_port(path)
        if kind.bench_job is None:
            report.skipped.append(f"{label} {path}: no benchmark for {kind.title} ports")
            continue
        say(f"{label} {path}")
        env = dict(kind.strict_env) if settings.strict_float else {}
        result = port_job(kind.bench_job, (spec, str(path), settings, label), env)
        report.measurements.extend(Measurement.from_dict(m) for m in result["measurements"])
        report.cost = report.cost or result.get("cost")
    say("measuring memory bandwidth and peak FLOP/s again")
    report.machine = best_limits(machine, run_job(_job_machine))
    return report


def best_limits(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The machine as measured ``before`` the run, with the better bandwidth and FLOP/s of the
    two measurements. The ceiling is what the machine can do; on a shared machine one
    measurement taken while a neighbour is busy reads low (copy bandwidth has read 18-40 GB/s
    on the same VM the same day), and a low ceiling flatters every port."""
    out = dict(before)
    for key in ("bandwidth_gbs", "peak_gflops"):
        out[key] = max(before[key], after[key])
        out[f"{key}_measured"] = [before[key], after[key]]
    curves = [m.get("bandwidth_by_footprint") or [] for m in (before, after)]
    if all(curves) and [s for s, _ in curves[0]] == [s for s, _ in curves[1]]:
        out["bandwidth_by_footprint"] = [
            [size, max(a, b)] for (size, a), (_, b) in zip(*curves, strict=True)
        ]
    return out
