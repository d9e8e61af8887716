"""The JAX ports' speed layer: switchable, and switching it changes no bit of a pong rollout."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envforge.backends.jax import load_module
from envforge.bench.ceiling import hlo_fused_work
from envforge.bench.jax_loop import initial_carry, make_rollout
from envforge.bench.measure import BenchSettings
from envforge.kit import speed_layer
from envforge.sandbox.base import command_environment
from envforge.spec import spec_for_name
from envforge.verify.strategies import sample_states

ROOT = Path(__file__).resolve().parents[2]
PORTS = ROOT / "generated"


def _special_floats() -> np.ndarray:
    bits = np.array(
        [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x3F800000]
        + [0x7FFFFFFF, 0x7FC00000, 0xFFC00001, 0x7F7FFFFF, 0x80000001, 0x7FFFFFFE],
        np.uint32,
    )
    rng = np.random.default_rng(0)
    return np.concatenate([bits, rng.integers(0, 1 << 32, 4096, dtype=np.uint32)]).view(np.float32)


@pytest.mark.parametrize("on", [True, False])
def test_settling_returns_the_same_bits(on: bool) -> None:
    """Signed zeros, denormals, infinities and random patterns pass bit for bit; a NaN stays a
    NaN (the one pattern 0x7FFFFFFE comes back as another NaN)."""
    x = _special_floats()
    with speed_layer.switched(on):
        settle = jax.jit(lambda tree: speed_layer.settle_floats(tree))  # a new trace each position
        pinned = np.asarray(settle({"v": x, "n": np.arange(3)})["v"])
        flags = np.random.default_rng(1).random((7, 64)) < 0.5
        settled = jax.jit(lambda *f: speed_layer.settle_flags(*f))(*flags)
    nan = np.isnan(x)
    assert np.array_equal(pinned.view(np.uint32)[~nan], x.view(np.uint32)[~nan])
    assert np.isnan(pinned[nan]).all()
    assert all(np.array_equal(np.asarray(s), f) for s, f in zip(settled, flags, strict=True))


@pytest.mark.parametrize("on", [True, False])
def test_flag_lookup_reads_every_entry_of_a_table_either_way(on: bool) -> None:
    """Packed bits (on) and the gather (off) give ``table[i]`` for every index, under vmap and
    of a table of fewer than 64 entries; more than 64 is refused."""
    rng = np.random.default_rng(2)
    for size in (64, 40, 1):
        table = rng.random(size) < 0.4
        table[-1] = True  # the highest bit of the top word
        with speed_layer.switched(on):
            look = jax.jit(jax.vmap(lambda i, t=table: speed_layer.flag_lookup(t, i)))
            got = np.asarray(look(jnp.arange(size, dtype=jnp.int32)))
        assert got.dtype == np.bool_ and np.array_equal(got, table), size
    with pytest.raises(ValueError, match="at most 64"):
        speed_layer.flag_lookup(np.zeros(65, bool), jnp.int32(0))


def test_switch_reads_the_environment_and_is_overridden_inside_switched(monkeypatch) -> None:
    monkeypatch.delenv(speed_layer.SWITCH_VARIABLE, raising=False)
    assert speed_layer.enabled()
    monkeypatch.setenv(speed_layer.SWITCH_VARIABLE, "off")
    assert not speed_layer.enabled()
    with speed_layer.switched(True):
        assert speed_layer.enabled()
    assert not speed_layer.enabled()
    monkeypatch.setenv(speed_layer.SWITCH_VARIABLE, "of")
    with pytest.raises(ValueError, match="ENVFORGE_SPEED_LAYER='of'"):
        speed_layer.enabled()
    monkeypatch.setenv(speed_layer.SWITCH_VARIABLE, "0")
    assert command_environment()[speed_layer.SWITCH_VARIABLE] == "0"  # reaches a sandbox


def test_pong_is_bit_identical_with_the_speed_layer_on_and_off() -> None:
    """Many valid states (bounds included) stepped once (four frames), and 64 batched steps
    with auto-resets from fresh resets: the same bits either way; and the switch really
    changes the compiled loop."""
    spec = spec_for_name("pong")
    module = load_module(PORTS / "pong" / "jax" / "pong.py")
    states = sample_states(spec, np.random.default_rng(5), 2048)
    actions = np.random.default_rng(6).integers(0, 3, 2048).astype(np.int32)
    carry = initial_carry(module, 256)
    outputs, finals, texts = {}, {}, {}
    for on in (True, False):
        with speed_layer.switched(on):
            step = jax.jit(jax.vmap(lambda s, a: module.step(module.from_canonical(s), a)))
            outputs[on] = jax.tree_util.tree_leaves(step(states, actions))
            loop = jax.jit(make_rollout(module, spec, "random", 64)).lower(carry, {}).compile()
        finals[on] = jax.tree_util.tree_leaves(loop(carry, {}))
        texts[on] = loop.as_text() or ""
    on_leaves, off_leaves = outputs[True] + finals[True], outputs[False] + finals[False]
    for on_leaf, off_leaf in zip(on_leaves, off_leaves, strict=True):
        a, b = np.asarray(on_leaf), np.asarray(off_leaf)
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert hlo_fused_work(texts[True]) < hlo_fused_work(texts[False])  # 1339 vs 4148 (2026-12-02)


def test_cartpole_sin_cos_stay_within_float32_rounding_and_are_jnp_when_off() -> None:
    """The layer's vectorized ``sincos`` (XLA:CPU's ``jnp.sin``/``cos`` are scalar libm calls)
    against float64 sin/cos, over the pole's range and far beyond it."""
    rng = np.random.default_rng(3)
    atol = 1e-7  # about one float32 ulp of 1.0 (jnp.sin/cos: 3.3e-8)
    for bound in (0.25, 4.0, 1e4):
        x = rng.uniform(-bound, bound, 200_000).astype(np.float32)
        x[:3] = (0.0, bound, -bound)
        sin, cos = (np.asarray(v, np.float64) for v in speed_layer.sincos(jnp.asarray(x)))
        assert np.abs(sin - np.sin(x.astype(np.float64))).max() < atol
        assert np.abs(cos - np.cos(x.astype(np.float64))).max() < atol
    with speed_layer.switched(False):
        sin, cos = speed_layer.sincos(jnp.asarray(x))
    assert np.array_equal(np.asarray(sin), np.asarray(jnp.sin(x)))
    assert np.array_equal(np.asarray(cos), np.asarray(jnp.cos(x)))


def test_bench_measures_both_positions_side_by_side(monkeypatch) -> None:
    from envforge.bench import jax_loop

    monkeypatch.setattr(
        jax_loop, "calls_run", lambda call, steps, min_run_s: lambda: (steps, 1.0, 1.0)
    )
    spec = spec_for_name("cartpole")
    settings = BenchSettings(
        batch_sizes=(4,), repeats=1, policies=("random",), speed_layers=("on", "off")
    )
    rows = jax_loop.measure_jax(spec, PORTS / "cartpole" / "jax", settings)
    assert [r.implementation for r in rows] == [
        "jax port",
        "jax port, first-state resets",
        "jax port, speed layer off",
        "jax port, speed layer off, first-state resets",
    ]
    assert isinstance(rows[0].compile_s, float)
