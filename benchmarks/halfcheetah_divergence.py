"""Divergence horizon of the HalfCheetah MJX port: how many steps free-running trajectories of
the port stay within epsilon of the reference's (gymnasium HalfCheetah-v5 on MuJoCo).

Both sides start from the reference's reset state and take the same open-loop actions (seeded
uniform random, or all zero); no re-syncing. For each episode the horizon is the first step at
which any element of qpos or qvel differs by more than epsilon (the episode cap if none does).

    python benchmarks/halfcheetah_divergence.py --episodes 20 --eps 1e-3 [--float32] [--json out.json]

--float32 sets ENVFORGE_HALFCHEETAH_FLOAT32=1 before the port is imported (MJX's usual float32;
the default port runs MJX in float64). Needs pip install -e ".[mujoco]".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LABELS = ["rootx", "rootz", "rooty", "bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"]


def reference_episodes(seeds: list[int], actions: np.ndarray) -> dict[str, np.ndarray]:
    """qpos, qvel after every step, and the reset states, from gymnasium (free-running)."""
    import gymnasium

    env = gymnasium.make("HalfCheetah-v5")
    n, steps = actions.shape[:2]
    out = {k: np.zeros((n, steps, 9)) for k in ("qpos", "qvel")}
    start = {k: np.zeros((n, 9)) for k in ("qpos", "qvel")}
    data = env.unwrapped.data
    for i, seed in enumerate(seeds):
        env.reset(seed=seed)
        start["qpos"][i], start["qvel"][i] = data.qpos, data.qvel
        for t in range(steps):
            env.step(actions[i, t])
            out["qpos"][i, t], out["qvel"][i, t] = data.qpos, data.qvel
    return {**out, "start_qpos": start["qpos"], "start_qvel": start["qvel"]}


def port_episodes(start: dict[str, np.ndarray], actions: np.ndarray) -> dict[str, np.ndarray]:
    sys.path.insert(0, str(ROOT / "generated" / "halfcheetah" / "jax"))
    import halfcheetah as port
    import jax
    import jax.numpy as jnp

    def episode(qpos, qvel, acts):  # type: ignore[no-untyped-def]
        state = port.EnvState(qpos, qvel, jnp.zeros_like(qvel), jnp.int32(0))

        def one(s, a):  # type: ignore[no-untyped-def]
            s2 = port.step(s, a)[0]
            return s2, (s2.qpos, s2.qvel)

        return jax.lax.scan(one, state, acts)[1]

    run = jax.jit(jax.vmap(episode))
    t0 = time.perf_counter()
    qpos, qvel = run(
        jnp.asarray(start["start_qpos"], port.FLOAT),
        jnp.asarray(start["start_qvel"], port.FLOAT),
        jnp.asarray(actions, jnp.float32),
    )
    qpos, qvel = np.asarray(qpos), np.asarray(qvel)
    return {
        "qpos": qpos,
        "qvel": qvel,
        "seconds": time.perf_counter() - t0,
        "dtype": str(port.FLOAT),
    }


def horizons(ref: dict, port: dict, eps: float) -> tuple[np.ndarray, np.ndarray]:
    err = np.maximum(
        np.abs(ref["qpos"] - port["qpos"]).max(axis=2),
        np.abs(ref["qvel"] - port["qvel"]).max(axis=2),
    )
    over = err > eps
    steps = err.shape[1]
    first = np.where(over.any(axis=1), over.argmax(axis=1) + 1, steps)
    return first, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--eps", type=float, default=1e-3)
    parser.add_argument("--float32", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.float32:
        os.environ["ENVFORGE_HALFCHEETAH_FLOAT32"] = "1"
    rng = np.random.default_rng(0)
    seeds = list(range(args.episodes))
    results = {}
    for policy in ("uniform", "zero"):
        if policy == "uniform":
            actions = rng.uniform(-1, 1, (args.episodes, args.steps, 6)).astype(np.float32)
        else:
            actions = np.zeros((args.episodes, args.steps, 6), np.float32)
        ref = reference_episodes(seeds, actions)
        port = port_episodes(ref, actions)
        first, err = horizons(ref, port, args.eps)
        results[policy] = {
            "horizon_min": int(first.min()),
            "horizon_median": float(np.median(first)),
            "horizon_max": int(first.max()),
            "within_eps_whole_episode": int((first == args.steps).sum()),
            "error_at_step": {
                str(t): float(err[:, t - 1].max())
                for t in (1, 10, 50, 100, 200, 500, args.steps)
                if t <= args.steps
            },
            "port_seconds": round(port["seconds"], 1),
        }
        print(policy, port["dtype"], json.dumps(results[policy]), flush=True)
    out = {
        "episodes": args.episodes,
        "steps": args.steps,
        "eps": args.eps,
        "float32": args.float32,
        "policies": results,
    }
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
