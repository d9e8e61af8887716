"""PPO on a port and on its reference, one side at a time, with each side's time split.

Used by ``benchmarks/train_speed.py`` (the "Training speed (PPO)" table) and by
``envforge train --time-split``. A JAX port trains fused (``train_fused``) and its split is
timed phase by phase at the run's shapes (``fused_split``); a Rust port and the reference train
with the host loop (``train_host``), which times its phases as it runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envforge.backends.recipe import open_driver, reference_recipe
from envforge.bench.python_loop import env_factory
from envforge.envs.make import make
from envforge.spec import EnvSpec
from envforge.targets import get_target
from envforge.train.config import PPOConfig
from envforge.train.host_ppo import train_host
from envforge.train.port_env import load_port
from envforge.train.ppo import TrainResult, rollout_rate, train_fused
from envforge.train.time_split import TimeSplit, fused_split, host_learning_added_back
from envforge.train.vec_env import DriverVecEnv, GymnasiumVecEnv, ObjectsVecEnv, VecEnv


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


def reference_vec_env(spec: EnvSpec, num_envs: int) -> tuple[VecEnv, str]:
    """The reference as a host vector env: a Python or gymnasium one's env objects stepped in a
    Python loop (as ``envforge bench`` steps them), any other through its Driver."""
    if spec.reference_kind in ("gymnasium", "python"):
        return ObjectsVecEnv(env_factory(spec), num_envs), "its env objects in a Python loop"
    driver = open_driver(reference_recipe(spec, strict_float=False), isolate=False)
    return DriverVecEnv(driver, spec, num_envs), f"its {spec.reference_kind} Driver"


def side(
    result: TrainResult, child_cpu_s: float, what: str, trainer: str, split: TimeSplit
) -> dict[str, Any]:
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
        "split": split.as_dict(),
    }
    if "learn_s" in extra:
        learn_s = extra["learn_s"] + extra["learn_s_per_update"]
        out["learn_share"] = round(learn_s / train_s, 3)
        out["rollout_steps_per_s"] = round(result.env_steps / max(train_s - learn_s, 1e-9), 1)
    return out


def host_split(result: TrainResult) -> TimeSplit:
    """The host loop's own laps, its first (compiling) update's learning counted once."""
    split: TimeSplit = result.extra["split"]
    return host_learning_added_back(split, result.extra["learn_s_per_update"])


def fused_side(
    module: Any, spec: EnvSpec, cfg: PPOConfig, result: TrainResult, seeds: int = 1
) -> TimeSplit:
    """A fused run's split: its phases timed alone, over the run's updates, beside its time."""
    per_update = fused_split(module, spec, cfg, seeds, result.train_s / cfg.num_updates)
    return per_update.over(cfg.num_updates)


def train_port(
    spec: EnvSpec, port: Path, target: str, cfg: PPOConfig, rollout: bool
) -> dict[str, Any]:
    """PPO on ``port``: fused for a JAX port, the host loop over ``envforge.make`` otherwise."""
    if get_target(target).python_module:
        module = load_port(port, spec.name)
        result = train_fused(module, spec, cfg)
        split = fused_side(module, spec, cfg, result)
        out = side(result, 0.0, f"{target} port", "fused JAX", split)
        if rollout:
            rate = rollout_rate(module, spec, cfg, 1, cfg.num_steps * 8)
            out["rollout_steps_per_s"] = round(rate, 1)
        return out
    vector = make(spec.name, target=target, num_envs=cfg.num_envs, autoreset_mode="SameStep")
    vec = GymnasiumVecEnv(spec.name, cfg.num_envs, vector_env=vector)
    before = children_cpu_s()
    result = train_host(vec, spec, cfg)
    out = side(result, children_cpu_s() - before, f"{target} port", "host loop", host_split(result))
    vec.close()
    return out


def train_reference(spec: EnvSpec, cfg: PPOConfig, seeds: int = 1) -> dict[str, Any]:
    """The host-loop PPO on the reference (``seeds`` policies side by side)."""
    vec, how = reference_vec_env(spec, seeds * cfg.num_envs)
    before = children_cpu_s()
    result = train_host(vec, spec, cfg, seeds=seeds)
    what = f"reference ({how})"
    out = side(result, children_cpu_s() - before, what, "host loop", host_split(result))
    vec.close()
    return out
