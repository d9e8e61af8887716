"""UNO's Rust port (generated/uno/rust), written by an agent in an `envforge prompt` workspace:
its in-step draws (reshuffles, a drawn wild's colour, the random agent's choices, an illegal
action's stand-in) go through `src/draws.rs`, fed from the reference's tape under verification
and from each env's own generator in `step`.

Each test builds the crate (pyo3/numpy/rayon from the shared cargo target directory in the
envforge cache); the verifying ones run rlcard beside it and are slow-marked.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, apply_patch
from test_rust_tape import QUICK, needs_rust

from envforge.spec import spec_for_name
from envforge.verify.runner import verify

pytest.importorskip("rlcard")

PORT = ROOT / "generated" / "uno" / "rust"
MASK = slice(240, 301)
"""The observation's legal-action mask over rlcard's 61 action ids."""


def reference_class() -> Any:
    path = ROOT / "references" / "uno" / "uno.py"
    module_spec = importlib.util.spec_from_file_location("uno_reference_for_rust", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.UnoVsRandom


def random_legal(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random legal action per row, from the mask in the observation."""
    keys = rng.random((obs.shape[0], 61)) * (obs[:, MASK] > 0)
    return np.asarray(keys.argmax(axis=1), np.int32)


def play_port(port: str | Path, games: int) -> tuple[list[float], list[int]]:
    """Random legal play on `envforge.make(port, target="rust", num_envs=256)`: each finished
    game's reward and length (agent steps)."""
    import envforge

    n = 256
    env = envforge.make(port, target="rust", num_envs=n)
    obs, _ = env.reset(seed=11)
    rng = np.random.default_rng(11)
    steps = np.zeros(n, np.int64)
    rewards: list[float] = []
    lengths: list[int] = []
    while len(rewards) < games:
        assert (obs[:, MASK].sum(axis=1) >= 1).all()  # always something legal, drawing at least
        obs, reward, terminated, truncated, _ = env.step(random_legal(obs, rng))
        assert np.array_equal(reward != 0, terminated)
        steps += 1
        rewards.extend(reward[terminated].tolist())
        lengths.extend(steps[terminated].tolist())
        steps[terminated | truncated] = 0
    env.close()
    return rewards, lengths


def play_reference(games: int) -> tuple[list[float], list[int]]:
    reference = reference_class()()
    rng = np.random.default_rng(5)
    np.random.seed(5)  # the random agent's module-level draws
    rewards: list[float] = []
    lengths: list[int] = []
    for game in range(games):
        obs, _ = reference.reset(seed=game)
        done, steps = False, 0
        while not done:
            obs, reward, done, _, _ = reference.step(int(random_legal(obs[None], rng)[0]))
            steps += 1
        rewards.append(reward)
        lengths.append(steps)
    return rewards, lengths


def plays_like_the_reference(port: str | Path) -> tuple[float, float]:
    """p-values of the agent's win rate (chi-squared) and of the game lengths (two-sample KS)
    under random legal play, port against rlcard."""
    from scipy.stats import chi2_contingency, ks_2samp

    rewards, lengths = play_port(port, 2000)
    ref_rewards, ref_lengths = play_reference(400)
    table = [[rewards.count(-1.0), rewards.count(1.0)]]
    table.append([ref_rewards.count(-1.0), ref_rewards.count(1.0)])
    return float(chi2_contingency(table).pvalue), float(ks_2samp(lengths, ref_lengths).pvalue)


@needs_rust
def test_make_gives_the_uno_rust_port_as_a_vector_env_playing_like_the_reference() -> None:
    """`envforge.make("uno", target="rust", num_envs=N)` plays from each env's own generator:
    under random legal play against rlcard's random agent the agent wins as often, and games
    last as long, as on the reference; a game ends only with a +-1 reward. (A smoke test of
    the make path, not of equivalence: an opponent always playing its first legal card passes
    it, p = 0.10 and 0.34; L1-L3 catch that one.)"""
    import envforge

    first = [envforge.make("uno", target="rust", num_envs=64).reset(seed=3)[0] for _ in range(2)]
    assert np.array_equal(first[0], first[1])  # the same seeds deal the same games
    assert len(np.unique(first[0], axis=0)) > 60  # each env its own deal
    wins, lengths = plays_like_the_reference("uno")
    assert wins > 1e-3 and lengths > 1e-3, (wins, lengths)


@needs_rust
@pytest.mark.slow
def test_the_uno_rust_port_is_equivalent_through_the_tape() -> None:
    report = verify(spec_for_name("uno"), PORT, [0, 1, 2, 3], QUICK)
    assert report.passed, [f.message for f in report.findings]
    assert "reference draws replayed and accounted for" in report.levels[1].summary


@needs_rust
@pytest.mark.slow
def test_the_random_agent_choosing_among_one_more_action_is_an_rng_tape_finding(
    tmp_path: Path,
) -> None:
    """The opponent's `np.random.choice(legal ids)` asked over one id too many: the draw of
    the wrong range is named with the port's line."""
    crate = tmp_path / "rust"
    shutil.copytree(PORT, crate, ignore=shutil.ignore_patterns("target"))
    old = "let action = legal.ids[draws.choice(legal.n)];"
    patched = apply_patch(
        crate / "src" / "uno.rs",
        tmp_path / "patched",
        (old, "let action = legal.ids[draws.choice(legal.n + 1).min(legal.n - 1)];"),
    )
    shutil.copy(patched.path, crate / "src" / "uno.rs")
    finding = verify(spec_for_name("uno"), crate, [1], QUICK).levels[0].findings[0]
    assert finding.check == "rng.tape", finding.message
    assert "the port asked choice of" in finding.message
    assert Path(finding.port_lines[0].file).name == "uno.rs"
    assert finding.port_lines[0].line in patched.lines
