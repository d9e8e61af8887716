"""The battle simulator's Rust port (generated/battle/rust): its reference is JavaScript run by
node, and in replicate mode the port re-implements the reference's xorshift32 (carried in the
canonical `rng` field) bit for bit, so no tape is needed.

Each verify builds the crate (pyo3/numpy/rayon from the shared cargo target directory in the
envforge cache) and runs node beside it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK_SWEEP, ROOT, apply_patch
from test_rust_tape import needs_rust

from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

PORT = ROOT / "generated" / "battle" / "rust"
QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None, seed_sweep=QUICK_SWEEP >> 8)
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")


@needs_rust
@needs_node
@pytest.mark.slow
def test_the_battle_rust_port_is_equivalent_to_the_node_reference() -> None:
    report = verify(spec_for_name("battle"), PORT, [0, 1, 2, 3], QUICK)
    assert report.passed, [f.message for f in report.findings]
    assert "resets identically" in report.levels[1].summary


@needs_rust
@needs_node
@pytest.mark.slow
def test_a_damage_roll_of_the_wrong_range_is_found_in_the_generator_state(
    tmp_path: Path,
) -> None:
    """`rand(15)` for the reference's `rand(16)`: the same number of draws, so the generator
    stays in step, but the damage differs and, modulo the other range, so do later draws."""
    crate = tmp_path / "rust"
    shutil.copytree(PORT, crate, ignore=shutil.ignore_patterns("target"))
    patched = apply_patch(
        crate / "src" / "battle.rs",
        tmp_path / "patched",
        ("let roll = 85 + self.rand(16) as i32;", "let roll = 85 + self.rand(15) as i32;"),
    )
    shutil.copy(patched.path, crate / "src" / "battle.rs")
    level = verify(spec_for_name("battle"), crate, [1], QUICK).levels[0]
    assert level.status == "fail"
    finding = level.findings[0]
    assert finding.check == "step.mismatch", finding.message
    assert "hp" in finding.message


@needs_rust
def test_make_gives_the_battle_rust_port_as_a_vector_env_playing_like_the_reference() -> None:
    """`envforge.make("battle", target="rust", num_envs=N)`: uniformly random legal play
    averages about -1.19 a battle (README, measured on the JAX port over 2,048 battles) and
    every return is a sum of quarters within [-1.75, 1.75]."""
    import envforge

    n = 256
    env = envforge.make("battle", target="rust", num_envs=n)
    spec = spec_for_name("battle")
    obs, _ = env.reset(seed=7)
    rng = np.random.default_rng(7)
    returns = np.zeros(n)
    finished: list[float] = []
    while len(finished) < 1000:
        mask = obs[:, 42:48] > 0  # none after a lost battle: the next step resets it
        keys = rng.random(mask.shape) * mask  # a uniform choice among the legal actions
        obs, reward, terminated, truncated, _ = env.step(keys.argmax(axis=1).astype(np.int32))
        assert obs.min() >= np.min(spec.observation.low) and obs.max() <= 1.0
        returns += reward
        done = terminated | truncated
        finished.extend(returns[done].tolist())
        returns[done] = 0.0
    done_returns = np.asarray(finished)
    assert np.array_equal(done_returns * 4, np.round(done_returns * 4))
    assert done_returns.min() >= -1.75 and done_returns.max() <= 1.75
    assert -1.35 < done_returns.mean() < -1.0, done_returns.mean()
    env.close()
