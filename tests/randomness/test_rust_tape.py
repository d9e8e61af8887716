"""The RNG tape for Rust ports: `src/draws.rs` (a copy of `envforge/rng/draws.rs`) fed from the
reference's tape under verification and from a per-env generator in `step`.

Each test builds a crate; pyo3/numpy/rayon come from the shared cargo target directory in the
envforge cache (about a minute on 2 cores the first time on a machine), a crate itself takes
about 10 s.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from blackjack_play import (
    assert_choice_of_12_finding,
    assert_outcomes_like_the_reference,
    port_outcomes,
)
from conftest import ROOT, apply_patch

from envforge.backends.rust import RustDriver
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

CANONICAL = ROOT / "envforge" / "rng" / "draws.rs"
BLACKJACK = ROOT / "generated" / "blackjack" / "rust"
QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None)
HAS_MATURIN = shutil.which("maturin") or (Path(sys.executable).parent / "maturin").exists()
needs_rust = pytest.mark.skipif(
    shutil.which("cargo") is None or not HAS_MATURIN, reason="needs cargo and maturin"
)


def test_every_rust_port_carries_the_draw_interface_verbatim() -> None:
    copies = sorted(ROOT.glob("generated/*/rust/src/draws.rs"))
    assert BLACKJACK / "src" / "draws.rs" in copies
    for copy in copies:
        assert copy.read_text() == CANONICAL.read_text(), f"{copy} differs from {CANONICAL}"


def _broken_crate(tmp_path: Path, old: str, new: str) -> tuple[Path, tuple[int, ...]]:
    crate = tmp_path / "rust"
    shutil.copytree(BLACKJACK, crate, ignore=shutil.ignore_patterns("target"))
    patched = apply_patch(crate / "src" / "blackjack.rs", tmp_path / "patched", (old, new))
    shutil.copy(patched.path, crate / "src" / "blackjack.rs")
    return crate, patched.lines


@needs_rust
@pytest.mark.parametrize("env", ["blackjack", "taxi", "frozenlake", "leduc"])
def test_rust_ports_are_equivalent_through_the_tape(env: str) -> None:
    report = verify(spec_for_name(env), ROOT / "generated" / env / "rust", [0, 1, 2, 3], QUICK)
    assert report.passed, [f.message for f in report.findings]
    assert "reference draws replayed and accounted for" in report.levels[1].summary


@needs_rust
def test_a_rust_port_drawing_one_extra_number_is_an_rng_tape_finding(tmp_path: Path) -> None:
    crate, lines = _broken_crate(
        tmp_path,
        "            append(&mut self.player, draw_card(draws));\n",
        "            append(&mut self.player, draw_card(draws));\n"
        "            let _ = draws.integers(0, 4);\n",
    )
    finding = verify(spec_for_name("blackjack"), crate, [1], QUICK).levels[0].findings[0]
    assert finding.check == "rng.tape"
    assert "draw #1" in finding.message and "integers[0, 4)" in finding.message
    assert "no draw #1 (drew 1 in all)" in finding.message
    assert finding.extra["draw"]["reference_count"] == 1
    assert finding.extra["draw"]["port_count"] == 2
    assert Path(finding.port_lines[0].file).name == "blackjack.rs"
    assert finding.port_lines[0].line in lines


@needs_rust
def test_a_rust_port_taking_a_draw_of_the_wrong_range_is_an_rng_tape_finding(
    tmp_path: Path,
) -> None:
    crate, lines = _broken_crate(
        tmp_path, "    DECK[draws.choice(DECK.len())]", "    DECK[draws.choice(DECK.len() - 1)]"
    )
    # the same wrong range deals reset's cards too: the run names both groups, the reset's
    # distribution and the step's draw, whose finding names the draw
    findings = verify(spec_for_name("blackjack"), crate, [1], QUICK).levels[0].findings
    (finding,) = [f for f in findings if f.check == "rng.tape"]
    # the draw's site is the line that called the helper (`#[track_caller]`), in step
    assert_choice_of_12_finding(finding, "blackjack.rs", "draw_card(draws)")


@needs_rust
def test_step_draws_from_each_envs_own_generator_outside_verification() -> None:
    """`step` (bench, training, envforge.make) deals from the generator seeded at reset: the
    same seeds deal the same cards, other seeds others, and the 13 choices come out uniform."""
    driver = RustDriver(spec_for_name("blackjack"), BLACKJACK)
    batch_class = driver.module.EnvBatch
    n = 20_000

    def deal(seeds: np.ndarray) -> np.ndarray:
        batch = batch_class(n)
        batch.reset(seeds)
        obs = np.zeros((n, 3), np.float32)
        reward = np.zeros(n, np.float32)
        flags = np.zeros(n, bool), np.zeros(n, bool)
        batch.step(np.ones(n, np.int32), obs, reward, *flags)  # every env hits once
        player: np.ndarray = batch.get_state()["player"]
        return player[:, :3]

    seeds = np.arange(n, dtype=np.uint32)
    first, again, other = deal(seeds), deal(seeds), deal(seeds + np.uint32(n))
    assert np.array_equal(first, again)
    assert (first != other).any(axis=1).mean() > 0.5
    counts = np.bincount(first[:, 2], minlength=11)[1:]
    expected = n * np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 4]) / 13
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 27.9, (counts, chi2)  # 9 df, p = 0.001


def test_rust_prompt_teaches_the_draw_interface_only_where_step_draws() -> None:
    from envforge.prompts.render import translation_prompt

    context = translation_prompt(spec_for_name("blackjack"), "rust", "port").context
    assert "## Randomness inside `step`" in context and "draws::step_rows(log" in context
    assert CANONICAL.read_text() in context  # the file to write verbatim
    assert "rng.tape" in context
    pong = translation_prompt(spec_for_name("pong"), "rust", "port").context
    assert "draws.rs" not in pong


@needs_rust
def test_make_gives_the_rust_port_as_a_vector_env_playing_like_the_reference() -> None:
    """`envforge.make(..., target="rust")` steps with each env's own generator: the outcomes of
    `stick_at_17` hands (lose, push, win, natural win) have the reference's frequencies."""
    import envforge

    env = envforge.make("blackjack", target="rust", num_envs=1000)
    assert_outcomes_like_the_reference(port_outcomes(env, seed=1)[1])


@needs_rust
@pytest.mark.parametrize("env", ["taxi", "frozenlake"])
def test_make_gives_the_taxi_and_frozenlake_rust_ports_as_vector_envs(env: str) -> None:
    import envforge

    vec = envforge.make(env, target="rust", num_envs=256)
    obs, _ = vec.reset(seed=3)
    ended = 0
    for _ in range(300):
        obs, reward, terminated, truncated, _ = vec.step(vec.action_space.sample())
        ended += int((terminated | truncated).sum())
    high = float(np.max(spec_for_name(env).observation.high))
    assert obs.min() >= 0 and obs.max() <= high
    assert ended >= 256  # every env ended at least one episode (the time limit at the latest)


@pytest.mark.slow
@needs_rust
def test_distribution_specs_draw_from_the_rust_ports_seeded_generator(tmp_path: Path) -> None:
    """`[rng] step = "distribution"`: `step_draws` without a tape draws from a generator seeded
    per row; the FrozenLake Rust port passes L1's two-sample tests, and a copy slipping with
    probability 1/4 each side instead of 1/3 fails them on `s`."""
    from envforge.spec import load_spec

    text = (ROOT / "references" / "frozenlake" / "env.toml").read_text()
    text = text.replace('step = "tape"', 'step = "distribution"\nstates = 2')
    (tmp_path / "env.toml").write_text(text + "\n[verify]\nreset_samples = 200\n")
    spec = load_spec(tmp_path / "env.toml")
    crate = ROOT / "generated" / "frozenlake" / "rust"
    options = VerifyOptions(isolate=False, sandbox=None)
    good = verify(spec, crate, [1], options).levels[0]
    assert good.status == "pass", good.summary
    assert good.stats["distribution_tests"] > 0
    broken = tmp_path / "rust"
    shutil.copytree(crate, broken, ignore=shutil.ignore_patterns("target"))
    source = broken / "src" / "frozenlake.rs"
    old = "let fail_rate = (1.0 - SUCCESS_RATE) / 2.0;"
    assert source.read_text().count(old) == 1
    source.write_text(source.read_text().replace(old, "let fail_rate = 1.0 / 4.0;"))
    level = verify(spec, broken, [1], options).levels[0]
    assert level.status == "fail"
    assert level.findings[0].check == "step.distribution"
    assert "chi-square" in level.findings[0].message


def test_mutation_campaigns_leave_the_verbatim_draw_interface_alone(tmp_path: Path) -> None:
    from envforge.mutate.workspace import resolve_target

    target = resolve_target(spec_for_name("blackjack"), "port", "rust", str(BLACKJACK))
    assert [p.name for p in target.files] == ["blackjack.rs", "lib.rs"]
    edited = tmp_path / "rust"
    shutil.copytree(BLACKJACK, edited, ignore=shutil.ignore_patterns("target"))
    with (edited / "src" / "draws.rs").open("a") as f:
        f.write("// edited: the port's own now\n")
    target = resolve_target(spec_for_name("blackjack"), "port", "rust", str(edited))
    assert "draws.rs" in [p.name for p in target.files]


@needs_rust
@pytest.mark.slow
def test_l0_runs_the_batchs_own_step_that_make_and_bench_take(tmp_path: Path) -> None:
    # the own-generator step (`EnvBatch.step`, envforge.make and bench) negates the reward; under
    # a tape spec the verifier stepped only `step_draws`, so nothing ran it (a leduc Rust mutant
    # that made it panic on every call survived a campaign)
    crate = tmp_path / "rust"
    shutil.copytree(BLACKJACK, crate, ignore=shutil.ignore_patterns("target"))
    lib = crate / "src" / "lib.rs"
    old = "= env.step(actions[k], rng);\n"
    assert lib.read_text().count(old) == 1
    lib.write_text(lib.read_text().replace(old, old + "reward[k] = -reward[k];\n"))
    level = verify(spec_for_name("blackjack"), crate, [0], QUICK).levels[0]
    found = [f for f in level.findings if f.check == "contract.own_step"]
    assert found and found[0].fields == ["reward"], [f.message for f in level.findings]
    assert "where step took no draw" in found[0].message
