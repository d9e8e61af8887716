"""Training throughput: PPO fused in JAX on a port vs the same PPO as a host loop on the reference.

Both trainers use the spec's ``[l4]`` hyperparameters and the same number of seeds; the host
loop steps the reference (CartPole: a gymnasium vector env; Pong: the C backend in-process) and
runs the same jitted acting/GAE/update code, so the difference is where the env loop lives.
Reported per env, measured in the same run: env steps per second of training (compilation
excluded, reported separately), steps per CPU-second (robust on a shared machine), and the
rollout-only rates (acting + env stepping, no learning), which bound what fusing can gain when
the PPO update itself is the cost.

    JAX_PLATFORMS=cpu python benchmarks/train_throughput.py            # cartpole and pong
    JAX_PLATFORMS=cpu python benchmarks/train_throughput.py --env pong --host-updates 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envforge.backends.recipe import open_driver, reference_recipe  # noqa: E402
from envforge.spec import EnvSpec, load_spec  # noqa: E402
from envforge.train.config import l4_config  # noqa: E402
from envforge.train.host_ppo import train_host  # noqa: E402
from envforge.train.port_env import load_port  # noqa: E402
from envforge.train.ppo import TrainResult, rollout_rate, train_fused  # noqa: E402
from envforge.train.vec_env import DriverVecEnv, GymnasiumVecEnv, VecEnv  # noqa: E402


def host_vec_env(spec: EnvSpec, rows: int) -> tuple[VecEnv, str]:
    if spec.reference_kind == "gymnasium":
        env_id = spec.reference.split(":", 1)[1]
        return GymnasiumVecEnv(env_id, rows), f"gymnasium.make_vec({env_id!r}, sync)"
    driver = open_driver(reference_recipe(spec, strict_float=False), isolate=False)
    return DriverVecEnv(driver, spec, rows), f"{spec.reference_kind} Driver, in-process"


def row(result: TrainResult) -> dict[str, Any]:
    return {
        "env_steps": result.env_steps,
        "jit_s": round(result.jit_s, 2),
        "train_s": round(result.train_s, 2),
        "steps_per_s": round(result.steps_per_second),
        "steps_per_cpu_s": round(result.env_steps / result.cpu_s) if result.cpu_s > 0 else None,
    }


def bench_env(
    name: str, seeds: int | None, fused_updates: int | None, host_updates: int
) -> dict[str, Any]:
    spec = load_spec(ROOT / "references" / name / "env.toml")
    l4 = l4_config(spec)
    k = seeds or l4.seeds
    port = ROOT / "generated" / name / "jax"
    cfg = l4.ppo
    fused_cfg = cfg.with_timesteps(fused_updates * cfg.batch_size) if fused_updates else cfg
    fused = train_fused(load_port(port, name), spec, fused_cfg, seeds=k)
    vec, baseline = host_vec_env(spec, k * cfg.num_envs)
    host = train_host(vec, spec, cfg.with_timesteps(host_updates * cfg.batch_size), seeds=k)
    vec.close()
    host_rollout_s = host.train_s - host.extra["learn_s"]  # N rollouts; N - 1 timed updates
    out = {
        "env": name,
        "seeds": k,
        "hyperparameters": {
            "num_envs": cfg.num_envs,
            "num_steps": cfg.num_steps,
            "update_epochs": cfg.update_epochs,
            "num_minibatches": cfg.num_minibatches,
            "hidden": list(cfg.hidden),
        },
        "baseline": baseline,
        "fused": row(fused),
        "host": row(host),
        "fused_rollout_steps_per_s": round(
            rollout_rate(load_port(port, name), spec, cfg, k, cfg.num_steps * 8)
        ),
        "host_rollout_steps_per_s": round(host.env_steps / max(host_rollout_s, 1e-9)),
    }
    out["speedup"] = round(out["fused"]["steps_per_s"] / max(1, out["host"]["steps_per_s"]), 1)
    if out["fused"]["steps_per_cpu_s"] and out["host"]["steps_per_cpu_s"]:
        out["speedup_per_cpu_s"] = round(
            out["fused"]["steps_per_cpu_s"] / out["host"]["steps_per_cpu_s"], 1
        )
    out["rollout_speedup"] = round(
        out["fused_rollout_steps_per_s"] / max(1, out["host_rollout_steps_per_s"]), 1
    )
    return out


def render(results: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"PPO training throughput, fused JAX port vs host loop on the reference ({os.cpu_count()} CPUs)"
    )
    for col in (
        "env",
        "trainer",
        "env steps",
        "JIT s",
        "train s",
        "steps/s",
        "steps/CPU-s",
        "rollout steps/s",
    ):
        table.add_column(col, justify="right" if col not in ("env", "trainer") else "left")
    for r in results:
        for side, label in (
            ("fused", "fused JAX (port)"),
            ("host", f"host loop ({r['baseline']})"),
        ):
            m = r[side]
            table.add_row(
                r["env"],
                label,
                f"{m['env_steps']:,}",
                f"{m['jit_s']:.1f}",
                f"{m['train_s']:.1f}",
                f"{m['steps_per_s']:,}",
                f"{m['steps_per_cpu_s'] or '-':,}",
                f"{r[side + '_rollout_steps_per_s']:,}",
            )
        table.add_row(
            r["env"],
            "[bold]speed-up",
            "",
            "",
            "",
            f"[bold]{r['speedup']}x",
            f"{r.get('speedup_per_cpu_s', '-')}x",
            f"{r['rollout_speedup']}x",
        )
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env", action="append", help="env name (repeatable; default cartpole and pong)"
    )
    parser.add_argument(
        "--seeds", type=int, help="training seeds for both trainers (default: spec [l4])"
    )
    parser.add_argument(
        "--fused-updates", type=int, help="updates for the fused trainer (default: spec budget)"
    )
    parser.add_argument(
        "--host-updates", type=int, default=10, help="updates for the host loop (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = [
        bench_env(name, args.seeds, args.fused_updates, max(2, args.host_updates))
        for name in args.env or ["cartpole", "pong"]
    ]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        render(results)


if __name__ == "__main__":
    main()
