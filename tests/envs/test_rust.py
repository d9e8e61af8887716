"""The Rust target: the backend's build cache and contract, and the hand-written Rust ports.

The first build of a crate compiles pyo3/numpy/rayon (about a minute on 2 cores); every later
crate, mutant and run reuses them from the shared cargo target directory in the envforge cache.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK_SWEEP

from envforge.backends.c import CDriver
from envforge.backends.rust import RustDriver
from envforge.native.rust_build import build_hash, cached_extension
from envforge.sandbox.confine import probe
from envforge.sandbox.docker import docker_available
from envforge.spec import spec_for_name
from envforge.train.evaluate import random_action_fn, run_episodes
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

ROOT = Path(__file__).resolve().parents[2]
PONG = ROOT / "generated/pong/rust"
CARTPOLE = ROOT / "generated/cartpole/rust"
HAS_MATURIN = shutil.which("maturin") or (Path(sys.executable).parent / "maturin").exists()
pytestmark = pytest.mark.skipif(
    shutil.which("cargo") is None or not HAS_MATURIN, reason="needs cargo and maturin"
)


@pytest.fixture(scope="module")
def pong_spec():  # type: ignore[no-untyped-def]
    return spec_for_name("pong")


@pytest.fixture(scope="module")
def pong_rust(pong_spec) -> RustDriver:  # type: ignore[no-untyped-def]
    return RustDriver(pong_spec, PONG, strict_float=True)


@pytest.fixture(scope="module")
def pong_c(pong_spec) -> CDriver:  # type: ignore[no-untyped-def]
    return CDriver(pong_spec, ROOT / "references/pong/pong.c", strict_float=True)


def copy_crate(tmp_path: Path, crate: Path) -> Path:
    out = tmp_path / crate.parent.name
    shutil.copytree(crate, out, ignore=shutil.ignore_patterns("target"))
    return out


def _bits(value: np.ndarray) -> np.ndarray:
    if value.dtype.kind == "f":
        return value.view(f"u{value.dtype.itemsize}")
    return value


# ---- the pong port against the C reference, in process --------------------------------------


def test_pong_port_replicates_the_c_reference_bit_for_bit(pong_rust, pong_c) -> None:  # type: ignore[no-untyped-def]
    seeds = np.arange(512, dtype=np.uint32)
    rust, c = pong_rust.reset(seeds), pong_c.reset(seeds)
    rng = np.random.default_rng(0)
    for t in range(600):
        actions = rng.integers(0, 3, len(seeds)).astype(np.int32)
        tr, tc = pong_rust.step(rust, actions), pong_c.step(c, actions)
        for name in tc.state:
            assert np.array_equal(_bits(tr.state[name]), _bits(tc.state[name])), (t, name)
        assert np.array_equal(tr.obs.view(np.uint32), tc.obs.view(np.uint32)), t
        assert np.array_equal(tr.reward, tc.reward) and np.array_equal(tr.terminated, tc.terminated)
        rust, c = tr.state, tc.state
    assert (rust["score_l"] + rust["score_r"]).sum() > 0  # points were played


@pytest.mark.parametrize("strict", [True, False])
def test_simd_lanes_match_the_c_reference_on_extreme_states(pong_spec, pong_c, strict) -> None:  # type: ignore[no-untyped-def]
    """The port steps four games per SIMD block (lanes.rs) and the rest one by one: both paths,
    from states full of NaN, infinities, signed zeros, denormals and field edges, must do what
    the C reference does (NaN equal to NaN: compilers may commute the operands of an add)."""
    rust = RustDriver(pong_spec, PONG, strict_float=strict)
    c = (
        pong_c
        if strict
        else CDriver(pong_spec, ROOT / "references/pong/pong.c", strict_float=False)
    )
    n = 4 * 13 + 1  # thirteen blocks and one game stepped alone
    rng = np.random.default_rng(3)
    specials = np.float32(
        [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38, 0.5, 399.9999, 400.0]
        + [470.0, 470.00003, 605.0, 620.0, -10.0, 640.0, 630.0, 10.0, 9.999999, 8.0, -8.0]
    )
    state = c.reset(np.arange(n, dtype=np.uint32))
    for name in ("paddle_yl", "paddle_yr", "ball_x", "ball_y", "ball_vx", "ball_vy"):
        mixed = rng.uniform(-50.0, 700.0, n).astype(np.float32)
        pick = rng.random(n) < 0.5
        mixed[pick] = rng.choice(specials, int(pick.sum()))
        state[name] = mixed
    state["score_l"] = rng.integers(18, 22, n).astype(np.int32)
    state["score_r"] = rng.integers(18, 22, n).astype(np.int32)
    state["tick"] = rng.integers(9990, 10001, n).astype(np.int32)
    left, right = dict(state), dict(state)
    for t in range(40):
        actions = rng.integers(0, 3, n).astype(np.int32)
        tr, tc = rust.step(left, actions), c.step(right, actions)
        for name in tc.state:
            np.testing.assert_array_equal(tr.state[name], tc.state[name], err_msg=f"{t} {name}")
        np.testing.assert_array_equal(tr.obs, tc.obs)
        np.testing.assert_array_equal(tr.reward, tc.reward)
        assert np.array_equal(tr.terminated, tc.terminated)
        assert np.array_equal(tr.truncated, tc.truncated)
        left, right = tr.state, tc.state


def test_cartpole_lanes_step_exactly_like_single_envs() -> None:
    """The CartPole port steps four envs per SIMD block and a batch's leftover envs one by one
    (cartpole.rs ``step_all``): both must give the same bits, from ordinary states and from
    wild ones (huge angles, infinities, NaN, denormals). Batches of 3 take the one-by-one path
    only; a batch of 4096 is all blocks."""
    spec = spec_for_name("cartpole")
    rng = np.random.default_rng(5)
    n = 4096
    wild = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 1e300, -1e300, 40.0, np.pi / 4]
    state = {
        "x": rng.uniform(-3, 3, n),
        "x_dot": rng.uniform(-5, 5, n),
        "theta": np.where(rng.random(n) < 0.3, rng.uniform(-50, 50, n), rng.uniform(-0.3, 0.3, n)),
        "theta_dot": rng.uniform(-5, 5, n),
        "time": rng.integers(0, 501, n).astype(np.int32),
    }
    for name in ("x", "x_dot", "theta", "theta_dot"):
        pick = rng.random(n) < 0.05
        state[name][pick] = rng.choice(wild, int(pick.sum()))
    actions = rng.integers(0, 2, n).astype(np.int32)
    for strict in (False, True):
        rust = RustDriver(spec, CARTPOLE, strict_float=strict)
        whole = rust.step(state, actions)
        parts = [
            rust.step({k: v[i : i + 3] for k, v in state.items()}, actions[i : i + 3])
            for i in range(0, n, 3)
        ]
        for name in state:
            joined = np.concatenate([p.state[name] for p in parts])
            assert np.array_equal(_bits(whole.state[name]), _bits(joined)), name
        assert np.array_equal(_bits(whole.obs), _bits(np.concatenate([p.obs for p in parts])))
        for flag in ("reward", "terminated", "truncated"):
            joined = np.concatenate([getattr(p, flag) for p in parts])
            assert np.array_equal(getattr(whole, flag), joined), flag
        rust.close()


def test_strict_float_flushes_denormals_like_the_c_reference(pong_spec, pong_rust, pong_c) -> None:  # type: ignore[no-untyped-def]
    state = pong_c.reset(np.zeros(1, np.uint32))
    # a ball on the agent's paddle moving right by a denormal: with DAZ it is not moving right
    state.update(ball_x=np.float32([605]), ball_y=np.float32([200]), paddle_yr=np.float32([180]))
    state["ball_vx"] = np.float32([1e-40])
    action = np.zeros(1, np.int32)
    fast_rust = RustDriver(pong_spec, PONG, strict_float=False)
    fast_c = CDriver(pong_spec, ROOT / "references/pong/pong.c", strict_float=False)
    strict = pong_rust.step(state, action)
    fast = fast_rust.step(state, action)
    assert strict.state["ball_vx"][0] == pong_c.step(state, action).state["ball_vx"][0] > 0
    assert fast.state["ball_vx"][0] == fast_c.step(state, action).state["ball_vx"][0] < 0


def test_the_evaluation_path_plays_the_same_episodes(pong_spec, pong_rust, pong_c) -> None:  # type: ignore[no-untyped-def]
    seeds = np.arange(32, dtype=np.uint32)
    kw = {"max_steps": 400}
    on_rust = run_episodes(pong_rust, pong_spec, random_action_fn(pong_spec, 1), seeds, **kw)
    on_c = run_episodes(pong_c, pong_spec, random_action_fn(pong_spec, 1), seeds, **kw)
    assert np.array_equal(on_rust.returns, on_c.returns)
    assert np.array_equal(on_rust.lengths, on_c.lengths) and on_rust.steps > 0


@pytest.mark.parametrize("crate", [PONG, CARTPOLE])
def test_reset_where_resets_only_the_ended_envs(crate: Path) -> None:
    """The bench's auto-reset: env i is reset from seeds[i] where done[i], the rest untouched."""
    spec = spec_for_name(crate.parent.name)
    batch_class = RustDriver(spec, crate).module.EnvBatch
    n = 9
    batch = batch_class(n)
    batch.reset(np.arange(n, dtype=np.uint32))
    obs = np.zeros((n, *spec.observation.shape), np.float32)
    buffers = (obs, np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool))
    for _ in range(5):
        batch.step(np.ones(n, np.int32), *buffers)
    before = batch.get_state()
    done = np.arange(n) % 3 == 0
    seeds = np.arange(100, 100 + n, dtype=np.uint32)
    batch.reset_where(done, seeds)
    after = batch.get_state()
    fresh = batch_class(n)
    fresh.reset(seeds)
    reset = fresh.get_state()
    for name, value in after.items():
        np.testing.assert_array_equal(value[done], reset[name][done], err_msg=name)
        np.testing.assert_array_equal(value[~done], before[name][~done], err_msg=name)
    with pytest.raises(ValueError, match="done"):
        batch.reset_where(done[:-1], seeds)


def test_the_batch_checks_its_buffers(pong_rust) -> None:  # type: ignore[no-untyped-def]
    batch = pong_rust.module.EnvBatch(0)
    batch.reset(np.arange(4, dtype=np.uint32))
    assert batch.num_envs == 4 and sorted(batch.get_state()) == sorted(pong_rust.spec.field_names)
    obs, reward, flags = np.zeros((4, 8), np.float32), np.zeros(4, np.float32), np.zeros(4, bool)
    with pytest.raises(ValueError, match="actions has 3 elements"):
        batch.step(np.zeros(3, np.int32), obs, reward, flags, flags.copy())
    with pytest.raises(KeyError, match="lacks field"):
        batch.set_state({"paddle_yl": np.zeros(4, np.float32)})


# ---- the build cache -------------------------------------------------------------------------


def test_unchanged_crates_are_not_rebuilt(pong_rust, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cached_extension(PONG) == pong_rust.library
    copy = copy_crate(tmp_path, PONG)
    assert build_hash(copy) == build_hash(PONG)  # the hash is the content, not the place
    lib = copy / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "\n// touched\n")
    assert build_hash(copy) != build_hash(PONG) and cached_extension(copy) is None


def test_build_errors_are_l0_findings_with_the_compiler_message(pong_spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    crate = copy_crate(tmp_path, PONG)
    physics = crate / "src" / "pong.rs"
    physics.write_text(
        physics.read_text().replace("self.ball_x += self.ball_vx;", "self.ball_x += self.ball_vxx;")
    )
    report = verify(pong_spec, crate, [0, 1], VerifyOptions(scale=0.1))
    assert [lv.status for lv in report.levels] == ["fail"]
    finding = report.levels[0].findings[0]
    assert finding.check == "contract" and "cargo build failed" in finding.message
    assert "no field `ball_vxx`" in finding.message and "src/pong.rs" in finding.message
    # one `side call:` prefix (the isolated child's own is not repeated), no maturin chatter
    assert finding.message.startswith("port build: cargo build failed")
    assert "Found CPython" not in finding.message


# ---- the ports through the verifier ----------------------------------------------------------


@pytest.mark.slow
def test_pong_rust_port_is_equivalent_at_levels_0_to_3(pong_spec) -> None:  # type: ignore[no-untyped-def]
    options = VerifyOptions(scale=0.05, seed_sweep=QUICK_SWEEP)
    report = verify(pong_spec, PONG, [0, 1, 2, 3], options)
    assert report.passed, [(lv.level, lv.summary) for lv in report.levels]


def test_cartpole_rust_port_is_equivalent_at_levels_0_to_3() -> None:
    report = verify(spec_for_name("cartpole"), CARTPOLE, [0, 1, 2, 3], VerifyOptions(scale=0.2))
    assert report.passed, [(lv.level, lv.summary) for lv in report.levels]


# a cargo build of a mutant plus L0-L1 (6 CPU s with the cargo target warm, 26 s measured once
# when it was not); test_mutate's small Rust campaign (default suite) builds a pong mutant
# through the verifier and asserts it is killed and field-localized
@pytest.mark.slow
def test_a_mutated_port_is_caught_at_l1_and_localized(pong_spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    crate = copy_crate(tmp_path, PONG)
    physics = crate / "src" / "pong.rs"
    physics.write_text(
        physics.read_text().replace("const SPEEDUP: f32 = 1.125;", "const SPEEDUP: f32 = 1.25;")
    )
    report = verify(pong_spec, crate, [0, 1], VerifyOptions(scale=0.2))
    assert [lv.status for lv in report.levels] == ["pass", "fail"]
    finding = report.levels[1].findings[0]
    assert "ball_vy" in finding.fields
    assert any(loc.file.endswith("pong.rs") and "ball_vy" in loc.text for loc in finding.port_lines)


def test_a_crate_is_built_from_its_own_files_whatever_was_built_before(tmp_path: Path) -> None:
    """Crates of one package name share cargo's target directory (dependencies compile once).
    Cargo judges a package fresh by file times, so a copy whose files were written before the
    last build of a same-named crate was once handed that crate's library: a mutation campaign
    writes every mutant's files up front and builds them one after another."""
    import os
    import time

    from envforge.native.rust_build import build_extension

    first = tmp_path / "first"
    shutil.copytree(CARTPOLE, first, ignore=shutil.ignore_patterns("target"))
    second = tmp_path / "second"
    shutil.copytree(CARTPOLE, second, ignore=shutil.ignore_patterns("target"))
    lib_rs = second / "src" / "lib.rs"
    guard = "Some(n) if n != got => Err("
    assert lib_rs.read_text().count(guard) == 1
    mutated = lib_rs.read_text().replace(guard, guard.replace("!=", "=="))
    lib_rs.write_text(mutated + f"// {time.time_ns()}: never built before\n")
    past = time.time() - 3600  # written an hour ago, before the first crate's build below
    for path in [*second.rglob("*"), second]:
        os.utime(path, (past, past))
    (first / "src" / "lib.rs").write_text(
        (first / "src" / "lib.rs").read_text() + f"// {time.time_ns()}: never built before\n"
    )
    build_extension(first)
    spec = spec_for_name("cartpole")
    driver = RustDriver(spec, second)
    state = driver.reset(np.arange(4, dtype=np.uint32))
    with pytest.raises(ValueError, match="other fields have 4"):  # the mutation's own effect
        driver._batch.set_state({k: np.ascontiguousarray(v) for k, v in state.items()})


def test_the_differential_steps_states_alone_where_a_port_steps_short_batches_apart(
    pong_spec, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """pong's Rust port steps blocks of four games in SIMD lanes (lanes.rs) and only the rest
    one by one (pong.rs). A mutant of the one-by-one step is invisible in batches of 4096;
    the differential also steps states one per call, and so finds it (and the field)."""
    import dataclasses

    from envforge.mutate.differential import LIGHT, Differential

    crate = copy_crate(tmp_path, PONG)
    scalar = crate / "src" / "pong.rs"
    old = "clampf(self.paddle_yr + moved, 0.0, HEIGHT - PADDLE_H)"
    assert scalar.read_text().count(old) == 1
    scalar.write_text(scalar.read_text().replace(old, old.replace("+ moved", "- moved")))
    original, mutant = RustDriver(pong_spec, PONG), RustDriver(pong_spec, crate)
    batches_only = dataclasses.replace(
        LIGHT, reset_seeds=0, rollout_envs=0, boundary_lines=0, single_states=0
    )
    assert not Differential(original, mutant).run(batches_only, "light").differs
    alone = Differential(original, mutant).run(
        dataclasses.replace(batches_only, single_states=64), "light"
    )
    assert "paddle_yr" in alone.differing
    assert alone.witness is not None and alone.witness["where"] == "sampled state, stepped alone"


SANDBOXES = [
    pytest.param(
        "process",
        marks=pytest.mark.skipif(not probe().read_only_mounts, reason="no mount namespaces"),
    ),
    pytest.param(
        "docker", marks=pytest.mark.skipif(not docker_available(), reason="no docker engine")
    ),
]


@pytest.mark.parametrize("kind", SANDBOXES)
def test_rust_ports_run_in_the_sandboxes(pong_spec, pong_rust, kind: str) -> None:  # type: ignore[no-untyped-def]
    options = VerifyOptions(scale=0.1, sandbox=kind, seed_sweep=QUICK_SWEEP)
    report = verify(pong_spec, PONG, [0, 1], options)
    assert report.passed, [(lv.level, lv.summary) for lv in report.levels]


def test_crate_builds_run_in_the_process_sandbox(pong_spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if not probe().read_only_mounts:
        pytest.skip("no mount namespaces")
    crate = copy_crate(tmp_path, PONG)
    outside = ROOT / f"escaped-by-build-script-{tmp_path.name}"
    (crate / "build.rs").write_text(f'fn main() {{ std::fs::write("{outside}", "x").unwrap(); }}\n')
    try:
        report = verify(pong_spec, crate, [0], VerifyOptions(scale=0.1, sandbox="process"))
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
    finding = report.levels[0].findings[0]
    assert finding.check == "contract" and "Read-only file system" in finding.message
