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
``--num-steps``; ``benchmarks/regenerate_docs.py`` renders them all as the
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

from envforge.backends.recipe import open_driver, reference_recipe  # noqa: E402
from envforge.bench.python_loop import env_factory  # noqa: E402
from envforge.bench.train_table import training_table  # noqa: E402
from envforge.envs.make import make  # noqa: E402
from envforge.spec import EnvSpec  # noqa: E402
from envforge.resolve import default_port  # noqa: E402
from envforge.spec import spec_for_name  # noqa: E402
from envforge.targets import get_target  # noqa: E402
from envforge.train.config import PPOConfig, l4_config  # noqa: E402
from envforge.train.host_ppo import train_host  # noqa: E402
from envforge.train.port_env import load_port  # noqa: E402
from envforge.train.ppo import TrainResult, rollout_rate, train_fused  # noqa: E402
from envforge.train.vec_env import DriverVecEnv, GymnasiumVecEnv, ObjectsVecEnv, VecEnv  # noqa: E402

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


def children_cpu_s() -> float:
    """CPU seconds of this process's live descendants (a node reference's process)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    mine, total, grew = {os.getpid()}, 0.0, True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                total += cpu[pid]
                grew = True
    return total


def ppo_config(spec: EnvSpec, args: argparse.Namespace, updates: int) -> PPOConfig:
    """The spec's ``[l4]`` PPO (network, batch, epochs), or the defaults; ``updates`` rollouts."""
    cfg = l4_config(spec).ppo if spec.l4 else PPOConfig()
    changes = {k: v for k, v in (("num_envs", args.num_envs), ("num_steps", args.num_steps)) if v}
    if changes:
        cfg = PPOConfig(**{**cfg.__dict__, **changes})
    return cfg.with_timesteps(updates * cfg.batch_size)


def reference_vec_env(spec: EnvSpec, num_envs: int) -> tuple[VecEnv, str]:
    if spec.reference_kind in ("gymnasium", "python"):
        return ObjectsVecEnv(env_factory(spec), num_envs), "its env objects in a Python loop"
    driver = open_driver(reference_recipe(spec, strict_float=False), isolate=False)
    return DriverVecEnv(driver, spec, num_envs), f"its {spec.reference_kind} Driver"


def side(result: TrainResult, child_cpu_s: float, what: str, trainer: str) -> dict[str, Any]:
    """One side's figures; the host loop's uncounted first learning step added back."""
    extra = result.extra
    train_s = result.train_s + extra.get("learn_s_per_update", 0.0)
    cpu_s = result.cpu_s + extra.get("learn_cpu_s_per_update", 0.0) + child_cpu_s
    out = {
        "implementation": what,
        "trainer": trainer,
        "env_steps": result.env_steps,
        "compile_s": round(result.jit_s, 2),
        "train_s": round(train_s, 3),
        "cpu_s": round(cpu_s, 3),
        "steps_per_s": round(result.env_steps / train_s, 1),
        "steps_per_cpu_s": round(result.env_steps / cpu_s, 1),
    }
    if "learn_s" in extra:
        learn_s = extra["learn_s"] + extra["learn_s_per_update"]
        out["learn_share"] = round(learn_s / train_s, 3)
        out["rollout_steps_per_s"] = round(result.env_steps / max(train_s - learn_s, 1e-9), 1)
    return out


def train_port(
    spec: EnvSpec, target: str, cfg: PPOConfig, rollout: bool
) -> tuple[dict[str, Any], str]:
    port = default_port(spec, target)
    if get_target(target).python_module:  # a JAX port: fused
        module = load_port(port, spec.name)
        out = side(train_fused(module, spec, cfg), 0.0, f"{target} port", "fused JAX")
        if rollout:
            rate = rollout_rate(module, spec, cfg, 1, cfg.num_steps * 8)
            out["rollout_steps_per_s"] = round(rate, 1)
        return out, str(port.relative_to(ROOT))
    vector = make(spec.name, target=target, num_envs=cfg.num_envs, autoreset_mode="SameStep")
    vec = GymnasiumVecEnv(spec.name, cfg.num_envs, vector_env=vector)
    before = children_cpu_s()
    result = train_host(vec, spec, cfg)
    out = side(result, children_cpu_s() - before, f"{target} port", "host loop")
    vec.close()
    return out, str(port.relative_to(ROOT))


def train_reference(spec: EnvSpec, cfg: PPOConfig) -> dict[str, Any]:
    vec, how = reference_vec_env(spec, cfg.num_envs)
    before = children_cpu_s()
    result = train_host(vec, spec, cfg)
    out = side(result, children_cpu_s() - before, f"reference ({how})", "host loop")
    vec.close()
    return out


def bench_env(name: str, target: str, args: argparse.Namespace, cpu: str) -> dict[str, Any]:
    spec = spec_for_name(name)
    port_cfg = ppo_config(spec, args, args.updates)
    ref_cfg = ppo_config(spec, args, args.ref_updates)
    load_before = [round(x, 2) for x in os.getloadavg()]
    print(f"{name}: training on the {target} port (load {load_before[0]})", file=sys.stderr)
    port, port_path = train_port(spec, target, port_cfg, args.rollout)
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
            (out / f"train-{name}{batch}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"CPU: {cpu}, {os.cpu_count()} cores")
    print("\n".join(training_table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
