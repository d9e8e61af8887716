"""PPO training speed with a Rust port in the loop vs the Python reference, side by side.

The same PPO (envforge's host loop, `envforge.train.host_ppo.train_host`: a jitted JAX policy
acts on numpy observations, the env steps on the host, a jitted update learns) trains for the
same number of updates, with the same hyperparameters and seeds, on two vector envs:

    rust        the port's `EnvBatch` stepped in place (rayon across envs, GIL released), the
                envs whose episode ended reset with `EnvBatch.reset_where`
    reference   a list of the reference's env objects stepped one after another in Python,
                each reset when its episode ends (as `envforge bench` steps Python references)

Both sides run in this process, one after the other, and their rates are printed together with
the ratio. The paper reports 1.5x for PPO on a Rust Game Boy emulator over a Cython one.

    JAX_PLATFORMS=cpu python benchmarks/train_rust_vs_reference.py                  # chip8
    JAX_PLATFORMS=cpu python benchmarks/train_rust_vs_reference.py --updates 4 --num-envs 8 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envforge.bench.python_loop import env_factory  # noqa: E402
from envforge.spec import EnvSpec, load_spec  # noqa: E402
from envforge.train.config import PPOConfig  # noqa: E402
from envforge.train.host_ppo import train_host  # noqa: E402
from envforge.train.ppo import TrainResult  # noqa: E402
from envforge.train.vec_env import HostStep, ObjectsVecEnv, SeedCounter  # noqa: E402


class RustBatchVecEnv:
    """A Rust port's ``EnvBatch``, stepped into preallocated buffers, auto-resetting."""

    def __init__(self, spec: EnvSpec, crate: Path, num_envs: int) -> None:
        from envforge.backends.rust import BATCH_CLASS, RustDriver

        self.driver = RustDriver(spec, crate)  # built here, or taken from the build cache
        self.batch = getattr(self.driver.module, BATCH_CLASS)(num_envs, False)
        self.num_envs = num_envs
        self.seeds = SeedCounter()
        self.obs = np.zeros((num_envs, *spec.observation.shape), np.float32)
        self.reward = np.zeros(num_envs, np.float32)
        self.terminated = np.zeros(num_envs, bool)
        self.truncated = np.zeros(num_envs, bool)
        self.returns = np.zeros(num_envs)

    def reset(self) -> np.ndarray:
        self.batch.reset(self.seeds.take(self.num_envs))
        self.batch.observe(self.obs)
        self.returns[:] = 0.0
        return self.obs.copy()

    def step(self, actions: np.ndarray) -> HostStep:
        self.batch.step(
            np.asarray(actions, np.int32), self.obs, self.reward, self.terminated, self.truncated
        )
        final_obs, reward = self.obs.copy(), self.reward.astype(np.float64)
        self.returns += reward
        finished = self.returns.copy()
        done = self.terminated | self.truncated
        if done.any():
            fresh = np.zeros(self.num_envs, np.uint32)
            fresh[done] = self.seeds.take(int(done.sum()))
            self.batch.reset_where(done, fresh)
            self.batch.observe(self.obs)
            self.returns[done] = 0.0
        return HostStep(
            self.obs.copy(), reward, self.terminated.copy(), self.truncated.copy(), final_obs,
            finished,
        )  # fmt: skip

    def close(self) -> None:
        self.driver.close()


def row(result: TrainResult) -> dict[str, Any]:
    learn_s = result.extra.get("learn_s", float("nan"))
    return {
        "env_steps": result.env_steps,
        "jit_s": round(result.jit_s, 2),
        "train_s": round(result.train_s, 2),
        "learn_s": round(learn_s, 2),
        "steps_per_s": round(result.steps_per_second),
        "steps_per_cpu_s": round(result.env_steps / result.cpu_s) if result.cpu_s > 0 else None,
        "rollout_steps_per_s": round(result.env_steps / max(result.train_s - learn_s, 1e-9)),
        "final_return": result.final_return(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="chip8")
    parser.add_argument("--updates", type=int, default=10, help="PPO updates on each side")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    args = parser.parse_args()
    spec = load_spec(ROOT / "references" / args.env / "env.toml")
    crate = ROOT / spec.port["rust"]
    cfg = PPOConfig(num_envs=args.num_envs, num_steps=args.num_steps)
    cfg = cfg.with_timesteps(args.updates * cfg.batch_size)
    load = os.getloadavg()
    results: dict[str, Any] = {}
    for side in ("rust", "reference"):
        vec = (
            RustBatchVecEnv(spec, crate, cfg.num_envs)
            if side == "rust"
            else ObjectsVecEnv(env_factory(spec), cfg.num_envs)
        )
        start = time.perf_counter()
        results[side] = row(train_host(vec, spec, cfg, seeds=1))
        results[side]["wall_s"] = round(time.perf_counter() - start, 2)
        vec.close()
    out = {
        "env": spec.name,
        "ppo": {
            "updates": args.updates,
            "num_envs": cfg.num_envs,
            "num_steps": cfg.num_steps,
            "update_epochs": cfg.update_epochs,
            "num_minibatches": cfg.num_minibatches,
            "hidden": list(cfg.hidden),
        },
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load],
        **results,
        "speedup": round(results["rust"]["steps_per_s"] / max(1, results["reference"]["steps_per_s"]), 2),
        "rollout_speedup": round(
            results["rust"]["rollout_steps_per_s"]
            / max(1, results["reference"]["rollout_steps_per_s"]),
            2,
        ),
    }  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{spec.name}: PPO, {args.updates} updates of {cfg.batch_size} steps "
          f"({cfg.num_envs} envs x {cfg.num_steps}), {os.cpu_count()} CPUs, load {load[0]:.1f}")  # fmt: skip
    for side in ("rust", "reference"):
        r = results[side]
        print(f"  {side:<10} {r['steps_per_s']:>8,} steps/s of training "
              f"({r['env_steps']:,} steps in {r['train_s']} s, {r['learn_s']} s of it learning; "
              f"rollouts alone {r['rollout_steps_per_s']:,} steps/s; jit {r['jit_s']} s)")  # fmt: skip
    print(
        f"  speed-up of training {out['speedup']}x; of the rollouts alone {out['rollout_speedup']}x"
    )


if __name__ == "__main__":
    main()
