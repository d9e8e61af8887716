"""envforge bench: the fast loops do the same work as obvious slow ones; reports add up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from envforge.bench.bench_report import BenchReport
from envforge.bench.ceiling import (
    Machine,
    StepCost,
    _jaxpr_ops,
    ceiling_sps,
    fused_instruction_count,
    limits,
    step_cost,
)
from envforge.bench.measure import (
    BenchSettings,
    Measurement,
    RunFailed,
    RunFn,
    interleaved,
    timed_runs,
)
from envforge.bench.suite import best_limits
from envforge.resolve import default_port
from envforge.spec import spec_for_name

ROOT = Path(__file__).resolve().parents[2]
TINY = BenchSettings(batch_sizes=(1, 4), repeats=2, min_run_s=0.01, policies=("random", "mlp"))


def _port(env: str) -> tuple:
    spec = spec_for_name(env)
    try:
        return spec, default_port(spec, "jax")
    except Exception:  # noqa: BLE001 - port not written yet
        pytest.skip(f"no JAX port of {env}")


def test_timed_runs_counts_env_steps_per_second() -> None:
    calls = []
    wall, cpu = timed_runs(
        lambda: calls.append(1), env_steps_per_call=10, repeats=3, min_run_s=0.001
    )
    assert len(wall) == len(cpu) == 3 and all(r > 0 for r in wall + cpu)
    assert len(calls) > 3  # the calibration call, then k calls per run


def test_runs_are_taken_in_rounds_and_a_failing_job_is_noted_and_dropped() -> None:
    order: list[str] = []

    def job(name: str, fail_at: int | None = None) -> RunFn:
        def run() -> tuple[int, float, float]:
            order.append(name)
            if fail_at is not None and order.count(name) == fail_at:
                raise RunFailed(f"{name} broke")
            return 100, 0.5, 0.25

        return run

    a, b, c = (Measurement(n, "port", "random", 1) for n in "abc")
    out = interleaved([(a, job("a")), (b, job("b", fail_at=2)), (c, job("c"))], repeats=3)
    assert out == [a, b, c]
    assert order == ["a", "b", "c", "a", "b", "c", "a", "c"]
    assert a.runs_sps == [200.0] * 3 and a.runs_cpu_sps == [400.0] * 3
    assert b.runs_sps == [200.0] and b.note == "b broke"


@pytest.mark.parametrize("resets", ["fresh", "first"])
def test_jax_scan_rollout_matches_a_plain_python_loop(resets: str) -> None:
    """The scanned, vmapped loop (actions, steps, auto-resets) against one env stepped by hand."""
    import jax
    import jax.numpy as jnp

    from envforge.bench.jax_loop import initial_carry, load_port, make_rollout

    spec, port = _port("cartpole")  # random play ends episodes within the rollout
    module = load_port(spec, port)
    batch, length = 3, 60
    carry = initial_carry(module, batch)
    rollout = jax.jit(make_rollout(module, spec, "random", length, resets))
    state, _, rng, total = rollout(carry, {"first": carry[0]})

    step, reset = jax.jit(module.step), jax.jit(module.reset)
    ended = 0
    for i in range(batch):
        first = jax.tree_util.tree_map(lambda x, i=i: x[i], carry[0])
        s = first
        x = np.uint32(carry[2][i])
        ret = np.float32(0.0)
        for _ in range(length):
            x = _xorshift(x)
            s, _, reward, terminated, truncated = step(s, jnp.int32(x % spec.action.n))
            ret += np.float32(reward)
            x = _xorshift(x)
            if bool(terminated | truncated):
                s, ended = (reset(jnp.uint32(x)) if resets == "fresh" else first), ended + 1
        for name, value in module.to_canonical(s).items():
            got = np.asarray(module.to_canonical(state)[name])[i]
            np.testing.assert_allclose(got, np.asarray(value), rtol=1e-5, atol=1e-6)
        assert np.uint32(rng[i]) == x
        assert float(total[i]) == pytest.approx(float(ret))
    assert ended > 0, "the rollout should have crossed at least one episode end"


def test_steps_per_call_sets_each_batch_s_scan_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """--steps-per-call: a slow port's large batches get shorter scans (at least one step);
    unset, a call is 65536 env steps of at least 16 scan steps, as before."""
    from envforge.bench import jax_loop

    assert [jax_loop.scan_length(b) for b in (1, 64, 4096, 65536)] == [2048, 1024, 16, 16]
    assert [jax_loop.scan_length(b, 8192) for b in (1, 64, 4096, 65536)] == [2048, 128, 2, 1]
    seen: list[int] = []

    def record(call: object, env_steps_per_call: int, min_run_s: float) -> RunFn:
        seen.append(env_steps_per_call)
        return lambda: (env_steps_per_call, 1.0, 1.0)

    monkeypatch.setattr(jax_loop, "calls_run", record)
    spec, port = _port("cartpole")
    settings = BenchSettings(
        batch_sizes=(2, 8),
        repeats=1,
        policies=("random",),
        reset_modes=("fresh",),
        steps_per_call=8,
    )
    jax_loop.measure_jax(spec, Path(port), settings)
    assert seen == [8, 8]  # batch 2: 4 scan steps; batch 8: one


def _xorshift(x: np.uint32) -> np.uint32:
    x = np.uint32(x ^ (x << np.uint32(13)))
    x = np.uint32(x ^ (x >> np.uint32(17)))
    return np.uint32(x ^ (x << np.uint32(5)))


def test_c_harness_steps_pong_with_both_policies() -> None:
    from envforge.bench.c_loop import measure_c_loop

    spec = spec_for_name("pong")
    path = spec.reference_path()
    assert path is not None
    rows = measure_c_loop(spec, path, TINY)
    assert {(m.policy, m.batch) for m in rows} == {(p, b) for p in TINY.policies for b in (1, 4)}
    for m in rows:
        assert not m.note, m.note
        assert len(m.runs_sps) == TINY.repeats and m.sps and m.sps > 0
        assert m.cpu_sps and m.cpu_sps > 0


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")
def test_rust_loop_steps_the_pong_crate_with_both_policies() -> None:
    from envforge.bench.rust_loop import measure_rust

    spec = spec_for_name("pong")
    rows = measure_rust(spec, ROOT / "generated" / "pong" / "rust", TINY)
    assert {(m.policy, m.batch) for m in rows} == {(p, b) for p in TINY.policies for b in (1, 4)}
    for m in rows:  # the crate has reset_where: ended games are reset, no caveat on the row
        assert m.implementation == "rust port" and m.role == "port" and m.note == ""
        assert len(m.runs_sps) == TINY.repeats and m.sps and m.sps > 0
        assert m.compile_s is not None and m.compile_s >= 0


class EndsEveryOtherStep:
    """An EnvBatch stand-in: env 0's episode ends on every second step; it logs its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.steps = 0

    def step(self, actions, obs, reward, terminated, truncated) -> None:  # noqa: ANN001
        self.steps += 1
        self.calls.append("step")
        obs[:] = 1.0
        terminated[:] = [self.steps % 2 == 0, False]
        truncated[:] = False

    def reset_where(self, done: np.ndarray, seeds: np.ndarray) -> None:
        self.calls.append(f"reset_where {done.tolist()}")

    def observe(self, obs: np.ndarray) -> None:
        self.calls.append("observe")
        obs[:] = 2.0


def test_rust_loop_observes_the_batch_after_a_step_that_reset_an_env() -> None:
    """The reset rows' observations are their new episodes' (node's loop observes every env
    after its step or reset); a step that ended nothing calls neither reset_where nor observe."""
    from envforge.bench.rust_loop import stepper

    batch = EndsEveryOtherStep()
    call = stepper(spec_for_name("cartpole"), batch, 2, "random", {}, np.random.default_rng(0))
    batch.calls.clear()
    call()
    call()
    assert batch.calls == ["step", "step", "reset_where [True, False]", "observe"]


@pytest.mark.parametrize("env", ["pong", "pendulum"])
def test_jitted_policy_acts_as_the_numpy_mlp(env: str) -> None:
    """The Rust loop's MLP (one jitted XLA call) chooses the numpy MLP's actions: the same
    discrete argmax (pong) and the same squashed continuous action (pendulum)."""
    from envforge.bench.jax_loop import mlp_params
    from envforge.bench.python_loop import mlp_actions
    from envforge.bench.rust_loop import jitted_policy

    spec = spec_for_name(env)
    params = mlp_params(spec, 64)
    obs = np.random.default_rng(0).normal(0, 5, (512, *spec.observation.shape)).astype(np.float32)
    fast, slow = jitted_policy(spec, params)(obs), mlp_actions(spec, params, obs)
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    if spec.action.type == "discrete":
        assert (fast == slow).mean() > 0.99  # float32 sums in another order: a tie may flip
    else:
        np.testing.assert_allclose(fast, slow, atol=1e-5)


def test_python_loop_steps_gymnasium_and_skips_huge_batches() -> None:
    from envforge.bench.python_loop import measure_python

    spec = spec_for_name("cartpole")
    settings = BenchSettings(batch_sizes=(2, 8), repeats=1, min_run_s=0.01, max_python_batch=4)
    rows = measure_python(spec, settings)
    measured = [m for m in rows if m.batch == 2]
    skipped = [m for m in rows if m.batch == 8]
    assert all(m.sps and m.sps > 0 for m in measured)
    assert all(m.sps is None and "not run" in m.note for m in skipped)


def test_jaxpr_op_count_weights_transcendentals() -> None:
    import jax
    import jax.numpy as jnp

    closed = jax.make_jaxpr(lambda x: jnp.sin(x) + x * 2.0)(jnp.zeros(3, jnp.float32))
    ops, transcendental = _jaxpr_ops(closed.jaxpr)
    assert transcendental == 3
    assert ops == 3 * 10 + 3 + 3  # sin weighted 10, one mul and one add per element


def test_multiply_add_pairs_and_the_compute_limit() -> None:
    """A float multiply whose one use is an add is a pair (one FMA slot for two operations); a
    multiply used twice, or an integer one, is not. A step of pairs only runs at the matmul
    FLOP/s (which counts an FMA as two); a step of lone operations at half of it."""
    import jax
    import jax.numpy as jnp

    from envforge.bench.ceiling import fma_pairs

    def step(a, b, i):  # type: ignore[no-untyped-def]
        paired = a * b + 1.0  # a pair
        shared = a * 3.0  # used twice: the compiler keeps the product
        return paired, shared + b, shared - a, (i * 2) + 1  # the integer pair does not count

    x = jnp.zeros(5, jnp.float32)
    closed = jax.make_jaxpr(step)(x, x, jnp.zeros(5, jnp.int32))
    assert fma_pairs(closed.jaxpr) == 5
    machine = Machine("cpu", 2, 1.0, bandwidth_gbs=1e6, peak_gflops=100.0, load_before=(0, 0, 0))
    all_pairs = StepCost(0, 0, 1, 100.0, 0, 0.0, fma_pairs=50.0)
    lone = StepCost(0, 0, 1, 100.0, 0, 0.0)
    assert ceiling_sps(machine, all_pairs, "random") == (pytest.approx(1e9), "compute")
    assert ceiling_sps(machine, lone, "random") == (pytest.approx(0.5e9), "compute")


def test_pong_step_cost_and_ceiling() -> None:
    from envforge.bench.jax_loop import load_port

    spec, port = _port("pong")
    cost = step_cost(spec, load_port(spec, port), hidden=64)
    assert cost.state_bytes == 40 and cost.obs_bytes == 32
    assert cost.bytes_per_step == 2 * 40 + 32 + 4 + 16
    assert cost.ops_per_step > 200  # four physics frames
    assert 0 < cost.fma_pairs < cost.ops_per_step / 10  # pong is compares and selects
    assert cost.mlp_fma_pairs == 8 * 64 + 64 * 3  # every matmul multiply-add
    assert fused_instruction_count(spec, load_port(spec, port)) > 0
    machine = Machine("cpu", 2, 1.0, bandwidth_gbs=10.0, peak_gflops=1000.0, load_before=(0, 0, 0))
    sps, bound = ceiling_sps(machine, cost, "random")
    assert bound == "memory" and sps == pytest.approx(10e9 / cost.bytes_per_step)


def test_report_ratios_targets_and_round_trip(tmp_path: Path) -> None:
    machine = Machine("cpu", 2, 1.0, 10.0, 100.0, (0.5, 0.5, 0.5)).__dict__
    cost = StepCost(40, 32, 132, 500.0, 0, 1000.0).to_dict()
    rows = [
        Measurement("C loop (reference)", "reference", "random", 1, [1e6, 2e6, 3e6], [2e6]),
        Measurement("C loop (reference)", "reference", "random", 64, [1e6]),
        Measurement("jax port", "port", "random", 1, [1e5]),
        Measurement("jax port", "port", "random", 64, [5e6], [2.5e6]),
        Measurement("C loop (reference)", "reference", "mlp", 64, [1e6]),
        Measurement("jax port", "port", "mlp", 64, [1e6]),
    ]
    report = BenchReport("pong", "pong.c", {}, machine, "today", "cmd", rows, cost)
    jax_row, mlp_row = [s for s in report.summaries() if s.role == "port"]
    # targets are the env's: judged on the random-action rows, the MLP rows only reported
    assert mlp_row.policy == "mlp" and mlp_row.ratio_to_reference == pytest.approx(1.0)
    assert mlp_row.meets_ratio_target is None and mlp_row.meets_ceiling_target is None
    assert jax_row.best_batch == 64 and jax_row.ratio_to_reference == pytest.approx(2.5)
    assert jax_row.meets_ratio_target  # C references: at least 2x
    assert jax_row.cpu_ratio_to_reference == pytest.approx(1.25)
    ceiling = min(10e9 / 132, 100e9 / 500)
    assert jax_row.fraction_of_ceiling == pytest.approx(5e6 / ceiling)
    again = BenchReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.summaries() == report.summaries()
    report.plot(str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 1000


def test_bench_cli_end_to_end_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "bench", "pong", "--batch", "2"]
        + ["--repeats", "1", "--min-run", "0.01", "--policy", "random", "--resets", "fresh"]
        + ["--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    names = {m["implementation"] for m in data["measurements"]}
    assert {"C loop (reference)", "jax port"} <= names
    assert all(m["sps"] and m["sps"] > 0 for m in data["measurements"])
    assert data["machine"]["bandwidth_gbs"] > 0 and data["step_cost"]["ops_per_step"] > 0
    for key in ("bandwidth_gbs", "peak_gflops"):  # measured before and after, the best kept
        seen = data["machine"][f"{key}_measured"]
        assert len(seen) == 2 and data["machine"][key] == max(seen)


def test_ceiling_uses_the_better_of_two_machine_measurements() -> None:
    before = Machine("cpu", 2, 1.0, 10.0, 300.0, (0.5, 0.5, 0.5)).to_dict()
    after = Machine("cpu", 2, 1.0, 20.0, 100.0, (3.0, 3.0, 3.0)).to_dict()
    machine = best_limits(before, after)
    assert machine["bandwidth_gbs"] == 20.0 and machine["peak_gflops"] == 300.0
    assert machine["load_before"] == (0.5, 0.5, 0.5)
    cost = StepCost(40, 32, 132, 500.0, 0, 1000.0).to_dict()
    rows = [Measurement("jax port", "port", "random", 64, [5e6])]
    report = BenchReport("pong", "pong.c", {}, machine, "today", "cmd", rows, cost)
    (row,) = report.summaries()
    assert row.ceiling_sps == pytest.approx(min(20e9 / 132, 300e9 / 500))
    assert "20.0 GB/s copy bandwidth (best of 10.0 and 20.0" in limits(machine)


def test_ceiling_holds_a_cache_resident_batch_to_the_cache_bandwidth() -> None:
    curve = [[2.0**20, 50.0], [8.0 * 2**20, 80.0], [32.0 * 2**20, 20.0]]
    machine = Machine("cpu", 2, 1.0, 30.0, 1e6, (0, 0, 0), bandwidth_by_footprint=curve)
    cost = StepCost(40, 32, 100, 500.0, 0, 1000.0)
    # 100 B per env: 65536 envs are 6.25 MiB, held to the 8 MiB copy's 80 GB/s
    assert ceiling_sps(machine, cost, "random", 65536) == (pytest.approx(80e9 / 100), "cache")
    # 4096 envs fit in 1 MiB: held to the best copy of any footprint that holds them (a
    # smaller working set is never slower to move: the 1 MiB copy's 50 is overhead)
    assert ceiling_sps(machine, cost, "random", 4096) == (pytest.approx(80e9 / 100), "cache")
    # 12 MiB: only the 32 MiB copy holds it, slower than DRAM's reading
    assert ceiling_sps(machine, cost, "random", 120_000) == (pytest.approx(30e9 / 100), "memory")
    # past the largest measured footprint, and with no batch: DRAM
    assert ceiling_sps(machine, cost, "random", 10**6)[1] == "memory"
    assert ceiling_sps(machine, cost, "random") == (pytest.approx(30e9 / 100), "memory")
    # the report judges each row at its best batch
    rows = [
        Measurement("jax port", "port", "random", 64, [1e6]),
        Measurement("jax port", "port", "random", 65536, [4e8]),
    ]
    report = BenchReport(
        "pong", "pong.c", {}, machine.to_dict(), "today", "cmd", rows, cost.to_dict()
    )
    (row,) = report.summaries()
    assert row.ceiling_bound == "cache" and row.fraction_of_ceiling == pytest.approx(0.5)
    assert "8 MiB 80" in limits(machine.to_dict())


def test_footprint_curves_merge_to_the_better_of_two() -> None:
    before = Machine("cpu", 2, 1.0, 10.0, 300.0, (0, 0, 0), None, None, [[1.0, 5.0], [2.0, 9.0]])
    after = Machine("cpu", 2, 1.0, 20.0, 100.0, (0, 0, 0), None, None, [[1.0, 7.0], [2.0, 3.0]])
    merged = best_limits(before.to_dict(), after.to_dict())
    assert merged["bandwidth_by_footprint"] == [[1.0, 7.0], [2.0, 9.0]]


def test_a_small_copy_is_repeated_until_256_mib_are_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A footprint that fits in cache copies in microseconds: each thread repeats its slice
    inside the timed call, so the pool's start-up does not set the reading."""
    from envforge.bench import ceiling

    calls: list[int] = []
    real = np.copyto

    def counting(dst: np.ndarray, src: np.ndarray) -> None:
        calls.append(src.nbytes)
        real(dst, src)

    monkeypatch.setattr(ceiling.np, "copyto", counting)
    assert ceiling.measure_bandwidth(0.5, repeats=1) > 0
    # 0.5 MiB copied: 512 repeats per run, the warm-up run and one timed, split over the threads
    assert sum(calls) == 2 * 512 * 2**19
    calls.clear()
    ceiling.measure_bandwidth(300, repeats=1)  # more than 256 MiB: copied once per run
    assert sum(calls) == 2 * 300 * 2**20 and len(calls) == 2 * (os.cpu_count() or 1)


@pytest.mark.parametrize(("flag", "value"), [("--policy", "greedy"), ("--speed-layer", "fast")])
def test_bench_cli_rejects_bad_flags(flag: str, value: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "bench", "pong", flag, value],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2 and flag in proc.stderr


def test_a_reference_kind_without_a_speed_up_target_renders() -> None:
    """A node reference has no ratio target (docs/bench/battle.json): the page says so."""
    import json

    from conftest import ROOT

    from envforge.bench.bench_report import BenchReport
    from envforge.bench.markdown import section

    report = BenchReport.from_dict(json.loads((ROOT / "docs/bench/battle.json").read_text()))
    assert "no speed-up target for a node reference" in section(report, "img/bench-battle.png")
