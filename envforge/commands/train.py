"""`envforge train`: train PPO on a JAX port (fused, vmapped over seeds) and save the policy."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from envforge.backends.recipe import open_driver, port_recipe
from envforge.commands import options
from envforge.errors import BadInput, DriverRaised, EnvforgeError
from envforge.resolve import existing_port, spec_for_port
from envforge.spec import bounds
from envforge.targets import target_of_port
from envforge.train.config import l4_config

TRAIN_HELP = (
    "Train PPO on a JAX port (one jit, vmapped over seeds) and save the policy.\n\n"
    "Not sandboxed: the port runs in this process, as you (the one deliberate exception to "
    '"every port runs in the sandbox", with envforge.make). Train on a port you trust, such '
    "as one envforge verified and you read; `envforge verify --levels 4` trains inside the "
    "sandbox instead."
)


def train_command(
    port: str = typer.Option(
        ..., "--port", help="JAX port directory or module (e.g. generated/cartpole/jax)."
    ),
    env: str = typer.Option(None, "--env", help="Env name (default: inferred from the port path)."),
    spec: str = typer.Option(None, "--spec", help="env.toml to take [l4] hyperparameters from."),
    timesteps: int = typer.Option(
        None,
        "--timesteps",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Env steps per seed (default: spec [l4]).",
    ),
    seeds: int = typer.Option(
        None,
        "--seeds",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="Training seeds, vmapped (default: spec [l4]).",
    ),
    seed: options.Seed = 0,
    out: str = typer.Option(
        None, "--out", help="Where to save the policy (default runs/<env>/policy.npz)."
    ),
    eval_episodes: int = typer.Option(
        8,
        "--eval-episodes",
        callback=bounds.option(bounds.NON_NEGATIVE),
        help="Greedy episodes per seed on the port afterwards (0: skip).",
    ),
    time_split: bool = typer.Option(
        False,
        "--time-split",
        help="Also say where training time goes (env stepping, policy inference, the update) "
        "on the port and, trained here for --reference-updates updates, on the reference.",
    ),
    reference_updates: int = typer.Option(
        3,
        "--reference-updates",
        callback=bounds.option(bounds.AT_LEAST_ONE),
        help="PPO updates on the reference for --time-split (the first one compiles).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Train PPO on a JAX port (one jit, vmapped over seeds) and save the policy."""
    port_path = existing_port(port)
    if not target_of_port(port_path).python_module:
        raise BadInput(f"envforge train needs a JAX port; {port_path} is not one")
    env_spec = spec_for_port(port_path, env, spec)
    cfg = l4_config(env_spec)
    ppo = cfg.ppo.with_timesteps(timesteps) if timesteps else cfg.ppo
    k = seeds or cfg.seeds
    if k < 1:
        raise BadInput(f"--seeds: expected >= 1, got {k}")
    if time_split and reference_updates < 2:
        raise BadInput("--reference-updates: expected >= 2 (the first update compiles)")

    from envforge.train.evaluate import evaluate_policy
    from envforge.train.port_env import load_port
    from envforge.train.ppo import train_fused
    from envforge.train.progress import training_progress

    console = Console(stderr=True) if as_json else Console()
    try:  # in this process, as documented: a port that does not import is a verdict on it
        module = load_port(port_path, env_spec.name)
    except EnvforgeError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the port's import raised
        detail = traceback.format_exc()
        raise DriverRaised("port", "import", f"raised {type(e).__name__}: {e}", detail) from None
    with training_progress(
        console, f"PPO {env_spec.name} x{k}", ppo.steps_per_seed * k
    ) as progress:
        result = train_fused(module, env_spec, ppo, seeds=k, seed=seed, progress=progress)
    result.policy.meta["port"] = str(port_path)
    out_path = Path(out) if out else Path("runs") / env_spec.name / "policy.npz"
    result.policy.save(out_path)

    summary: dict[str, Any] = {
        "env": env_spec.name,
        "port": str(port_path),
        "policy": str(out_path),
        "seeds": k,
        "env_steps": result.env_steps,
        "jit_s": round(result.jit_s, 3),
        "train_s": round(result.train_s, 3),
        "steps_per_second": round(result.steps_per_second),
        "final_train_return": result.final_return(),
    }
    if eval_episodes > 0:
        driver = open_driver(port_recipe(env_spec, port_path), isolate=False)
        seeds_eval = np.arange(eval_episodes, dtype=np.uint32)
        stats = evaluate_policy(driver, env_spec, result.policy, eval_episodes, seeds_eval)
        summary["eval_mean_return"] = float(stats.returns.mean())
        summary["eval_mean_return_per_seed"] = [
            float(g.mean()) for g in stats.by_group(stats.returns)
        ]
    splits = {}
    if time_split:
        from envforge.bench.train_sides import fused_side, train_reference

        console.print("timing the port's phases, then PPO on the reference")
        splits["port"] = fused_side(module, env_spec, ppo, result, seeds=k).as_dict()
        reference = train_reference(
            env_spec, ppo.with_timesteps(reference_updates * ppo.batch_size), seeds=k
        )
        splits["reference"] = reference["split"]
        summary["reference_steps_per_second"] = round(reference["steps_per_s"])
        summary["time_split"] = splits
    if as_json:
        print(json.dumps(summary, indent=2))
        sys.exit(0)
    table = Table(title=f"envforge train {env_spec.name}")
    table.add_column("")
    table.add_column("value")
    for key, value in summary.items():
        if key != "time_split":
            table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    console.print(table)
    if splits:
        console.print(split_table(splits))
    sys.exit(0)


def split_table(splits: dict[str, dict[str, Any]]) -> Table:
    """Seconds per update and share of each phase, one row per side."""
    table = Table(title="where training time goes (seconds per update, share)")
    phases = list(next(iter(splits.values()))["seconds"])  # env, policy, update, other
    table.add_column("side")
    for phase in phases:
        table.add_column(phase, justify="right")
    table.add_column("how")
    for name, split in splits.items():
        per_update = max(split["updates"], 1)
        cells = [
            f"{split['seconds'][p] / per_update:.4g} ({100 * split['share'][p]:.0f}%)"
            for p in phases
        ]
        table.add_row(name, *cells, split["how"])
    return table


def register(app: typer.Typer) -> None:
    app.command("train", help=TRAIN_HELP)(train_command)
