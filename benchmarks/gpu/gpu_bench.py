"""The GPU run, ready before a device is lent: pong JAX's raw throughput, HalfCheetah on MJX
against MuJoCo, and PPO on pong and CartPole, in one JSON and one Markdown table.

Run by ``benchmarks/gpu/run.sh`` (which installs the carried wheels and puts the source tree on
``PYTHONPATH``); it needs only what that script names. Each part is timed side by side in this
process, compilation apart, and a part that cannot run here (no mujoco, no C compiler) says
why in its row instead of failing the run. ``--tiny`` is the CI size: it proves the script runs,
never how fast anything is.

    benchmarks/gpu/run.sh --out /tmp/gpu            # on the GPU machine: well under 8 minutes
    benchmarks/gpu/run.sh --tiny --out /tmp/gpu     # anywhere, a few minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

PAPER = {
    "pong_steps_per_s": 275e6,
    "ppo_speedup": 42.0,
    "mjx_vs_mujoco": 1.0,
}
"""The figures this run is set beside (arXiv 2603.12145: pong JAX steps/s, PPO's speedup over
its reference, HalfCheetah MJX against MuJoCo), as the issue quotes them."""

FULL = {
    "pong_batches": [2**p for p in range(10, 21, 2)],
    "pong_steps": 256,
    "mjx_batches": [2**10, 2**12],  # MJX compiles for a minute or more per shape
    "mjx_steps": 64,
    "mujoco_envs": 64,
    "ppo_envs": [1024, 8192],
    "ppo_steps": 32,
    "ppo_updates": 8,
    "ref_updates": 2,
    "ref_envs": 256,
}
TINY = {
    "pong_batches": [8],
    "pong_steps": 8,
    "mjx_batches": [2],
    "mjx_steps": 2,
    "mujoco_envs": 2,
    "ppo_envs": [4],
    "ppo_steps": 4,
    "ppo_updates": 1,
    "ref_updates": 2,
    "ref_envs": 4,
}


def spec_and_port(env: str) -> tuple[Any, Any]:
    from envforge.spec import load_spec
    from envforge.train.port_env import load_port

    spec = load_spec(ROOT / "references" / env / "env.toml")
    return spec, load_port(ROOT / "generated" / env / "jax", env)


def timed(fn: Callable[..., Any], *args: Any, repeats: int = 3) -> tuple[float, float]:
    """(compile seconds, fastest of ``repeats`` warm calls' seconds), a first warm call apart."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    compile_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return compile_s, best


def port_throughput(env: str, batch: int, steps: int) -> dict[str, Any]:
    """Steps/s of ``batch`` auto-resetting copies of a JAX port under uniform random actions."""
    from envforge.train.port_env import AutoResetEnv

    spec, module = spec_and_port(env)
    auto = AutoResetEnv(module, spec.episode_cap)
    n = spec.action.n

    def run(key: jax.Array) -> jax.Array:
        episodes, _ = jax.vmap(auto.reset)(jax.random.split(key, batch))

        def step(carry: Any, key: jax.Array) -> tuple[Any, jax.Array]:
            act_key, env_key = jax.random.split(key)
            actions = jax.random.randint(act_key, (batch,), 0, n)
            carry, res = jax.vmap(auto.step)(jax.random.split(env_key, batch), carry, actions)
            return carry, res.reward.sum()

        return jax.lax.scan(step, episodes, jax.random.split(key, steps))[1].sum()

    compile_s, best = timed(run, jax.random.PRNGKey(0))
    return {"batch": batch, "steps_per_s": batch * steps / best, "compile_s": compile_s}


def pong_part(size: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for batch in size["pong_batches"]:
        row = port_throughput("pong", batch, size["pong_steps"])
        row["of_paper"] = row["steps_per_s"] / PAPER["pong_steps_per_s"]
        rows.append(row)
    return rows


def mujoco_steps_per_s(port: Any, envs: int, steps: int) -> float:
    """MuJoCo's C stepping of HalfCheetah-v5 (5 substeps an env step), one core, random ctrl."""
    import mujoco
    import numpy as np

    model = port.MJ_MODEL
    datas = [mujoco.MjData(model) for _ in range(envs)]
    rng = np.random.default_rng(0)
    ctrl = rng.uniform(-1, 1, (steps, envs, model.nu))
    start = time.perf_counter()
    for t in range(steps):
        for data, u in zip(datas, ctrl[t], strict=True):
            data.ctrl[:] = u
            mujoco.mj_step(model, data, nstep=port.FRAME_SKIP)
    return envs * steps / (time.perf_counter() - start)


def halfcheetah_part(size: dict[str, Any]) -> dict[str, Any]:
    try:
        import mujoco  # noqa: F401
        from mujoco import mjx  # noqa: F401
    except ImportError as error:
        return {"skipped": f"mujoco/mujoco-mjx not installed here ({error})"}
    _, port = spec_and_port("halfcheetah")  # imports gymnasium, for its model file
    mujoco_rate = mujoco_steps_per_s(port, size["mujoco_envs"], max(4, size["mjx_steps"]))
    rows = []
    for batch in size["mjx_batches"]:
        seeds = jnp.arange(batch, dtype=jnp.uint32)
        action = jnp.zeros((batch, port.MJ_MODEL.nu), port.FLOAT)

        def run(seeds: jax.Array, action: jax.Array) -> jax.Array:
            state = jax.vmap(port.reset)(seeds)

            def step(state: Any, _: None) -> tuple[Any, jax.Array]:
                state, _, reward, _, _ = jax.vmap(port.step)(state, action)
                return state, reward.sum()

            return jax.lax.scan(step, state, None, size["mjx_steps"])[1].sum()

        compile_s, best = timed(run, seeds, action)
        rate = batch * size["mjx_steps"] / best
        rows.append({"batch": batch, "steps_per_s": rate, "compile_s": compile_s})
    best_mjx = max(r["steps_per_s"] for r in rows)
    return {
        "mujoco_steps_per_s": mujoco_rate,
        "mujoco": f"mujoco {port.mujoco.__version__} mj_step, {size['mujoco_envs']} envs, one core",
        "mjx": rows,
        "mjx_vs_mujoco": best_mjx / mujoco_rate,
        "precision": "float32" if jnp.float32 == port.FLOAT else "float64",
    }


def ppo_part(env: str, size: dict[str, Any]) -> dict[str, Any]:
    """Fused PPO on the JAX port at each env count (time split included), then the host-loop
    PPO on the reference at a small env count, for the speedup."""
    from envforge.bench.train_sides import fused_side, train_reference
    from envforge.train.config import PPOConfig, l4_config
    from envforge.train.ppo import train_fused

    spec, module = spec_and_port(env)
    base = l4_config(spec).ppo if spec.l4 else PPOConfig()
    rows = []
    for envs in size["ppo_envs"]:
        cfg = PPOConfig(**{**base.__dict__, "num_envs": envs, "num_steps": size["ppo_steps"]})
        cfg = cfg.with_timesteps(size["ppo_updates"] * cfg.batch_size)
        result = train_fused(module, spec, cfg)
        split = fused_side(module, spec, cfg, result).as_dict()
        rows.append(
            {
                "num_envs": envs,
                "steps_per_s": result.steps_per_second,
                "compile_s": result.jit_s,
                "share": split["share"],
            }
        )
    out: dict[str, Any] = {"port": rows}
    try:
        ref_cfg = PPOConfig(
            **{**base.__dict__, "num_envs": size["ref_envs"], "num_steps": size["ppo_steps"]}
        )
        ref_cfg = ref_cfg.with_timesteps(size["ref_updates"] * ref_cfg.batch_size)
        reference = train_reference(spec, ref_cfg)
        out["reference"] = {
            "num_envs": size["ref_envs"],
            "steps_per_s": reference["steps_per_s"],
            "implementation": reference["implementation"],
            "share": reference["split"]["share"],
        }
        best = max(r["steps_per_s"] for r in rows)
        out["speedup"] = best / reference["steps_per_s"]
    except Exception as error:  # a missing compiler or gymnasium: say so, keep the port rows
        out["reference"] = {"skipped": f"{type(error).__name__}: {error}"}
    return out


def third_party_modules() -> list[str]:
    """Top-level modules imported so far that are not the standard library or envforge's own."""
    tops = {name.split(".")[0] for name in sys.modules}
    ours = {"envforge", "generated", "benchmarks", "__main__"}
    return sorted(t for t in tops - ours if t not in sys.stdlib_module_names and t[0] != "_")


def fmt(rate: float) -> str:
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= scale:
            return f"{rate / scale:.3g}{unit}"
    return f"{rate:.3g}"


def shares(share: dict[str, float]) -> str:
    return " / ".join(f"{100 * share[p]:.0f}%" for p in ("env", "policy", "update"))


def markdown(report: dict[str, Any]) -> str:
    """One table: each part's rows, the paper's figure beside them where it has one."""
    m = report["machine"]
    lines = [
        f"GPU run, {report['date']}: {m['device']} (JAX {m['jax']}, {m['backend']}), "
        f"{m['cpu_count']} CPU cores, sizes `{report['size']}`, {report['wall_s']:.0f} s in all.",
        "",
        "| part | size | steps/s | beside | note |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    parts = report["parts"]
    for name, part in parts.items():
        if "skipped" in part or "error" in part:
            lines.append(f"| {name} | - | - | - | {part.get('skipped') or part['error']} |")
    for row in parts["pong"].get("rows", []):
        paper = f"{100 * row['of_paper']:.2g}% of the paper's {fmt(PAPER['pong_steps_per_s'])}"
        lines.append(
            f"| pong JAX, random actions | {row['batch']} envs | "
            f"{fmt(row['steps_per_s'])} | {paper} | compile {row['compile_s']:.1f} s |"
        )
    cheetah = parts["halfcheetah"]
    if "mjx" in cheetah:
        lines.append(
            f"| HalfCheetah MuJoCo | {cheetah['mujoco']} | "
            f"{fmt(cheetah['mujoco_steps_per_s'])} | - | the C library, CPU |"
        )
        for row in cheetah["mjx"]:
            ratio = row["steps_per_s"] / cheetah["mujoco_steps_per_s"]
            lines.append(
                f"| HalfCheetah MJX ({cheetah['precision']}) | {row['batch']} envs | "
                f"{fmt(row['steps_per_s'])} | {ratio:.3g}x MuJoCo (paper: about 1x) | "
                f"compile {row['compile_s']:.1f} s |"
            )
    for env in ("pong", "cartpole"):
        part = parts.get(f"ppo_{env}", {})
        for row in part.get("port", []):
            speed = f"{part['speedup']:.3g}x reference" if "speedup" in part else "-"
            lines.append(
                f"| PPO {env}, fused JAX port | {row['num_envs']} envs | "
                f"{fmt(row['steps_per_s'])} | {speed} (paper: 42x) | "
                f"env / policy / update {shares(row['share'])} |"
            )
        ref = part.get("reference", {})
        if "steps_per_s" in ref:
            lines.append(
                f"| PPO {env}, {ref['implementation']} | {ref['num_envs']} envs | "
                f"{fmt(ref['steps_per_s'])} | - | "
                f"env / policy / update {shares(ref['share'])} |"
            )
        elif "skipped" in ref:
            lines.append(f"| PPO {env}, reference | - | - | - | {ref['skipped']} |")
    return "\n".join(lines) + "\n"


def run_part(name: str, fn: Callable[[], Any], deadline: float) -> dict[str, Any]:
    """One part, or why it did not run: past the time budget, or the error it raised."""
    if time.perf_counter() > deadline:
        return {"skipped": "the run's time budget was spent before this part"}
    print(f"gpu run: {name}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        out = fn()
    except Exception as error:
        tail = traceback.format_exc().strip().splitlines()[-3:]
        return {"error": f"{type(error).__name__}: {error}", "traceback": tail}
    part = out if isinstance(out, dict) else {"rows": out}
    part["wall_s"] = time.perf_counter() - start
    return part


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="CI sizes: checks it runs, no more")
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-run"), help="output folder")
    parser.add_argument("--skip", action="append", default=[], help="a part to leave out")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no part after this")
    args = parser.parse_args(argv)
    os.environ.setdefault("ENVFORGE_HALFCHEETAH_FLOAT32", "1")  # MJX's usual precision on a GPU
    size = TINY if args.tiny else FULL
    started = time.perf_counter()
    deadline = started + args.budget_s
    plan: dict[str, Callable[[], Any]] = {
        "pong": lambda: pong_part(size),
        "ppo_pong": lambda: ppo_part("pong", size),
        "ppo_cartpole": lambda: ppo_part("cartpole", size),
        "halfcheetah": lambda: halfcheetah_part(size),
    }
    parts = {
        name: {"skipped": "--skip"} if name in args.skip else run_part(name, fn, deadline)
        for name, fn in plan.items()
    }
    device = jax.devices()[0]
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "size": "tiny" if args.tiny else "full",
        "sizes": size,
        "paper": PAPER,
        "machine": {
            "device": getattr(device, "device_kind", str(device)),
            "backend": jax.default_backend(),
            "jax": jax.__version__,
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "load": [round(x, 2) for x in os.getloadavg()],
        },
        "parts": parts,
        "wall_s": time.perf_counter() - started,
        "imported": third_party_modules(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-run.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "gpu-run.md").write_text(markdown(report))
    print(markdown(report))
    return 0 if not any("error" in p for p in parts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
