"""Training speed: PPO on an env's best port against the same PPO on its reference, side by side.

The paper's headline measure: env steps per second of PPO *training* (acting,
stepping, GAE and the update), on the port that envforge ships as the fastest for the env and on
the reference, with the same network, batch (num_envs x num_steps), epochs and minibatches, one
seed, measured one after the other in this process:

    jax port    PPO fused in JAX (``envforge.train.ppo.train_fused``): the whole run is one
                jitted scan, the port's step inside it
    rust port   the host-loop PPO (``envforge.train.host_ppo.train_host``) over
                ``envforge.make(env, target="rust", num_envs=N)``: a jitted policy acts on numpy
                observations, the Rust ``EnvBatch`` steps (rayon, GIL released), a jitted update
    reference   the same host-loop PPO over the reference: its env objects stepped in a Python
                loop (gymnasium and Python references, as ``envforge bench`` steps them), or its
                Driver in this process (a C reference; node runs in its own process)

Compilation (the fused run's, the host loop's acting and first update) and building (cargo) are
excluded and reported apart. The host loop's first update compiles its learning step, so that
update's learning is not in its timing; one update's measured learning time (wall and CPU) is
added back, so every update counts. ``per CPU-second`` divides by the CPU time of this process
and its children (node), all threads, so it is little disturbed by other load. The rollout rate
(acting and stepping only) says how much of the gap the update, run by both sides alike, closes.

    JAX_PLATFORMS=cpu python benchmarks/train_speed.py                      # the six envs
    JAX_PLATFORMS=cpu python benchmarks/train_speed.py --env uno --env pong:rust --no-write
    JAX_PLATFORMS=cpu python benchmarks/train_speed.py --env cartpole --updates 2 --ref-updates 2

Writes ``docs/bench/train-<env>.json`` (``train-<env>-<envs>x<steps>.json`` with ``--num-envs`` or
``--num-steps``, ``train-<env>-<target>...`` for a port other than the env's fastest; ``benchmarks/regenerate_docs.py`` renders them all as the
"Training speed (PPO)" table of docs/BENCHMARKS.md) and prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envforge.bench.train_sides import train_port, train_reference  # noqa: E402
from envforge.bench.train_table import training_table  # noqa: E402
from envforge.resolve import default_port  # noqa: E402
from envforge.spec import EnvSpec, spec_for_name  # noqa: E402
from envforge.train.config import PPOConfig, l4_config  # noqa: E402

BEST = {
    "pong": "jax",
    "cartpole": "jax",
    "uno": "rust",
    "battle": "rust",
    "chip8": "rust",
    "blackjack": "rust",
}
"""The port each env trains fastest on here (docs/BENCHMARKS.md, random-action rows, 2 cores)."""
TARGET = {"pong": 50.0, "cartpole": 50.0}
"""Issue 36: >= 50x where the env dominates (CartPole, pong), >= 10x for the others."""


def cpu_model() -> str:
    """The CPU as ``lscpu`` names it (``Model name``)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown (lscpu gave no model name)"


def ppo_config(spec: EnvSpec, args: argparse.Namespace, updates: int) -> PPOConfig:
    """The spec's ``[l4]`` PPO (network, batch, epochs), or the defaults; ``updates`` rollouts."""
    cfg = l4_config(spec).ppo if spec.l4 else PPOConfig()
    changes = {k: v for k, v in (("num_envs", args.num_envs), ("num_steps", args.num_steps)) if v}
    if changes:
        cfg = PPOConfig(**{**cfg.__dict__, **changes})
    return cfg.with_timesteps(updates * cfg.batch_size)


def bench_env(name: str, target: str, args: argparse.Namespace, cpu: str) -> dict[str, Any]:
    spec = spec_for_name(name)
    port_cfg = ppo_config(spec, args, args.updates)
    ref_cfg = ppo_config(spec, args, args.ref_updates)
    load_before = [round(x, 2) for x in os.getloadavg()]
    print(f"{name}: training on the {target} port (load {load_before[0]})", file=sys.stderr)
    port_dir = default_port(spec, target)
    port = train_port(spec, port_dir, target, port_cfg, args.rollout)
    port_path = str(port_dir.relative_to(ROOT))
    print(f"{name}: training on the reference", file=sys.stderr)
    reference = train_reference(spec, ref_cfg)
    ratio = port["steps_per_s"] / reference["steps_per_s"]
    per_cpu = port["steps_per_cpu_s"] / reference["steps_per_cpu_s"]
    target_x = TARGET.get(name, 10.0)
    result: dict[str, Any] = {
        "env": name,
        "target": target,
        "port_path": port_path,
        "reference": spec.reference,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["benchmarks/train_speed.py", *sys.argv[1:]]),
        "machine": {
            "cpu": cpu,
            "cores": os.cpu_count(),
            "load_before": load_before,
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "ppo": {
            "seeds": 1,
            "num_envs": port_cfg.num_envs,
            "num_steps": port_cfg.num_steps,
            "update_epochs": port_cfg.update_epochs,
            "num_minibatches": port_cfg.num_minibatches,
            "hidden": list(port_cfg.hidden),
            "port_updates": port_cfg.num_updates,
            "reference_updates": ref_cfg.num_updates,
        },
        "port": port,
        "reference_side": reference,
        "speedup": round(ratio, 2),
        "speedup_per_cpu_s": round(per_cpu, 2),
        "target_x": target_x,
        "met": min(ratio, per_cpu) >= target_x,  # a loaded machine skews the wall ratio
    }
    if "rollout_steps_per_s" in port and "rollout_steps_per_s" in reference:
        result["rollout_speedup"] = round(
            port["rollout_steps_per_s"] / reference["rollout_steps_per_s"], 2
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env",
        action="append",
        help="ENV or ENV:TARGET (repeatable; default: "
        + ", ".join(f"{e}:{t}" for e, t in BEST.items())
        + ")",
    )
    parser.add_argument("--updates", type=int, default=16, help="PPO updates on the port side")
    parser.add_argument(
        "--ref-updates", type=int, default=3, help="PPO updates on the reference side"
    )
    parser.add_argument("--num-envs", type=int, help="override the spec's [l4] num_envs")
    parser.add_argument("--num-steps", type=int, help="override the spec's [l4] num_steps")
    parser.add_argument(
        "--no-rollout",
        dest="rollout",
        action="store_false",
        help="skip the fused rollout-only rate (one more compilation per JAX port)",
    )
    parser.add_argument(
        "--out", default=str(ROOT / "docs" / "bench"), help="folder for train-<env>.json"
    )
    parser.add_argument("--no-write", action="store_true", help="print only, write no JSON")
    args = parser.parse_args(argv)
    if args.updates < 1 or args.ref_updates < 2:
        parser.error("--updates must be >= 1 and --ref-updates >= 2 (the first one compiles)")
    cpu = cpu_model()
    results = []
    for item in args.env or list(BEST):
        name, _, target = item.partition(":")
        if name not in BEST and not target:
            parser.error(f"{name}: say its port's target, e.g. --env {name}:jax")
        started = time.perf_counter()
        result = bench_env(name, target or BEST[name], args, cpu)
        result["wall_s"] = round(time.perf_counter() - started, 1)
        results.append(result)
        if not args.no_write:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            ppo = result["ppo"]  # the spec's batch: train-<env>.json; another: a file of its own
            batch = (
                f"-{ppo['num_envs']}x{ppo['num_steps']}" if args.num_envs or args.num_steps else ""
            )
            port = "" if result["target"] == BEST.get(name) else f"-{result['target']}"
            (out / f"train-{name}{port}{batch}.json").write_text(
                json.dumps(result, indent=2) + "\n"
            )
    print(f"CPU: {cpu}, {os.cpu_count()} cores")
    print("\n".join(training_table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
