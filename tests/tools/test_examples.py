"""The training examples in examples/ run (on tiny budgets) against the ports they document."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import jax
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
needs_rust = pytest.mark.skipif(
    shutil.which("cargo") is None
    or not (shutil.which("maturin") or (Path(sys.executable).parent / "maturin").exists()),
    reason="needs cargo and maturin",
)


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_purejaxrl_example_learns_cartpole_on_the_gymnax_api() -> None:
    ppo = example("purejaxrl_gymnax")
    config = ppo.Config(num_envs=8, num_steps=64, total_timesteps=16 * 8 * 64)
    metrics = jax.jit(ppo.make_train(config))(jax.random.key(0))
    returns, ended = np.asarray(metrics["mean_return"]), np.asarray(metrics["episodes"])
    assert returns.shape == (16,) and np.isfinite(np.asarray(metrics["loss"])).all()
    assert ended[0] > 0 and ended[-1] > 0
    # a random policy balances ~20 steps; 8k steps of PPO already do clearly better
    assert returns[-1] > 2 * returns[0], returns


@needs_rust
def test_cleanrl_example_trains_on_the_rust_pong_vector_env() -> None:
    ppo = example("ppo_vector_env")
    result = ppo.train(ppo.Args(num_envs=4, num_steps=32, total_timesteps=3 * 4 * 32))
    assert len(result["updates"]) == 3
    assert all(np.isfinite(row["loss"]) for row in result["updates"])


def test_cleanrl_advantages_mask_the_next_step_reset() -> None:
    """A truncated step bootstraps from the next value; a terminated one does not; no
    advantage flows back across an episode end."""
    ppo = example("ppo_vector_env")
    args = ppo.Args(num_envs=1, num_steps=3, gamma=0.5, gae_lambda=1.0)
    batch = {
        "values": np.array([[1.0], [2.0], [4.0]], np.float32),
        "rewards": np.array([[1.0], [0.0], [1.0]], np.float32),
        "terminated": np.array([[0.0], [0.0], [1.0]], np.float32),
        "done": np.array([[1.0], [0.0], [1.0]], np.float32),  # step 0 truncated
    }
    adv = ppo.advantages(args, batch, next_value=np.array([8.0], np.float32))
    # step 2 terminated: 1 - 4; step 1 chains into it: 0 + 0.5 * 4 - 2 + 0.5 * (-3)
    np.testing.assert_allclose(adv[:, 0], [1 + 0.5 * 2 - 1, -1.5, -3.0])
