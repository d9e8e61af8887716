"""The JavaScript baseline: a JS reference stepped in a plain node loop (``node_harness.js``).

Like the C loop, the harness keeps a batch of the reference's own objects and, per step, draws
each env's action (xorshift32, or the bench's MLP computed in JS), steps it, resets it when its
episode ends and observes it. It times itself inside node, so neither envforge's batched
protocol nor Python is measured: this is the reference as a JavaScript user runs it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from envforge.backends.node import node_executable
from envforge.bench.jax_loop import mlp_params
from envforge.bench.measure import BenchSettings, Measurement, RunFailed, interleaved
from envforge.errors import BadInput
from envforge.spec import EnvSpec

HARNESS = Path(__file__).with_name("node_harness.js")


def policy_file(spec: EnvSpec, settings: BenchSettings, use_mlp: bool, folder: Path) -> Path:
    params = mlp_params(spec, settings.hidden)
    data = {
        "obs_size": int(np.prod(spec.observation.shape)),
        "n_actions": spec.action.n,
        "use_mlp": use_mlp,
        "hidden": settings.hidden,
        "w1": params["w1"].reshape(-1).tolist(),
        "w2": params["w2"].reshape(-1).tolist(),
    }
    path = folder / f"policy-{int(use_mlp)}.json"
    path.write_text(json.dumps(data))
    return path


def measure_node_loop(spec: EnvSpec, reference: Path, settings: BenchSettings) -> list[Measurement]:
    if spec.action.type != "discrete":
        raise BadInput(f"{spec.name}: the node loop drives discrete actions only")
    node = node_executable()
    label = "node loop (reference)"
    folder = Path(tempfile.mkdtemp(prefix="envforge-node-bench-"))
    jobs = []
    for policy in settings.policies:
        policy_path = policy_file(spec, settings, policy == "mlp", folder)
        for batch in settings.batch_sizes:
            m = Measurement(label, "reference", policy, batch)
            args = [node, str(HARNESS), str(reference), str(batch), str(settings.min_run_s)]
            jobs.append((m, partial(_harness_run, [*args, str(policy_path)])))
    try:
        return interleaved(jobs, settings.repeats)
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def _harness_run(args: list[str]) -> tuple[int, float, float]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RunFailed(f"node harness exit {proc.returncode}: {proc.stderr[-200:]}")
    steps, wall, cpu = proc.stdout.split()[:3]
    return int(steps), float(wall), float(cpu)
