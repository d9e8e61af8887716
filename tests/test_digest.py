"""Block digests of reset states (the L1 seed sweep's currency), in-process and across the
isolated-driver boundary."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import PONG_SPEC

from envforge.backends.digest import state_digests
from envforge.backends.recipe import open_driver, reference_recipe
from envforge.errors import BadInput
from envforge.spec import load_spec
from envforge.verify.runner import parse_seed_sweep

SPEC = load_spec(PONG_SPEC)


def random_states(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        f.name: rng.integers(0, 2**31, n).astype(f.np_dtype)
        if f.np_dtype.kind in "iu"
        else rng.normal(size=n).astype(f.np_dtype)
        for f in SPEC.state
    }


def test_one_changed_value_changes_only_its_block() -> None:
    states = random_states(10_000)
    base = state_digests(SPEC, states, 1000)
    assert base.dtype == np.uint64 and base.shape == (10,)
    for name in ("paddle_yl", "score_r", "rng"):
        changed = {k: v.copy() for k, v in states.items()}
        flat = changed[name].view(np.uint32)
        flat[4321] ^= np.uint32(1)  # one bit of one field of one row
        after = state_digests(SPEC, changed, 1000)
        assert np.flatnonzero(after != base).tolist() == [4]


def test_swapped_rows_and_cancelling_changes_are_seen() -> None:
    states = random_states(64)
    swapped = {k: v[[1, 0, *range(2, 64)]] for k, v in states.items()}
    assert (state_digests(SPEC, swapped, 64) != state_digests(SPEC, states, 64)).all()
    moved = {k: v.copy() for k, v in states.items()}
    moved["tick"][3] += 1
    moved["tick"][5] -= 1  # a plain sum would not notice
    assert (state_digests(SPEC, moved, 64) != state_digests(SPEC, states, 64)).all()


def test_every_byte_of_every_dtype_and_shape_counts() -> None:
    """Fields of 1, 4 and 8 bytes, scalar and shaped, strided or not: one flipped bit anywhere
    changes its row's block, and a strided view hashes like its contiguous copy."""
    from envforge.spec import StateField

    fields = [
        StateField(name="flag", dtype="bool"),
        StateField(name="small", dtype="uint8", shape=(3,)),
        StateField(name="wide", dtype="float64", shape=(2,)),
        StateField(name="count", dtype="int64"),
        StateField(name="f", dtype="float32"),
    ]
    spec = SPEC.model_copy(update={"state": fields})
    rng = np.random.default_rng(1)
    n = 3000
    rec = np.zeros(
        n,
        [("flag", "?"), ("small", "u1", (3,)), ("wide", "f8", (2,)), ("count", "i8"), ("f", "f4")],
    )
    rec["small"] = rng.integers(0, 256, (n, 3))
    rec["wide"] = rng.normal(size=(n, 2))
    rec["count"] = rng.integers(-(2**62), 2**62, n)
    rec["f"] = rng.normal(size=n)
    views = {f.name: rec[f.name] for f in fields}
    base = state_digests(spec, views, 500)
    copies = {k: np.ascontiguousarray(v) for k, v in views.items()}
    assert (state_digests(spec, copies, 500) == base).all()
    for name, index in (("flag", 10), ("small", (1200, 2)), ("wide", (2999, 1)), ("count", 7)):
        changed = {k: v.copy() for k, v in copies.items()}
        value = changed[name]
        if value.dtype == bool:
            value[index] = ~value[index]
        else:
            value.view(f"u{value.dtype.itemsize}")[index] ^= 1 << (8 * value.dtype.itemsize - 1)
        row = index if isinstance(index, int) else index[0]
        assert np.flatnonzero(state_digests(spec, changed, 500) != base).tolist() == [row // 500]


@pytest.mark.parametrize("side", ["c fast", "c strict", "jax"])
def test_native_digests_are_the_numpy_digests(side: str) -> None:
    """The C shim and the JAX driver hash their resets where they make them (no state leaves
    C or XLA); the digests must be exactly what ``state_digests`` gives for the same states,
    for whole blocks and for a short last block (where the JAX driver falls back to numpy)."""
    from envforge.backends.base import canonicalize
    from envforge.backends.recipe import build_driver, port_recipe

    if side == "jax":
        driver = build_driver(port_recipe(SPEC, SPEC.root.parents[1] / "generated/pong/jax"))
    else:
        driver = build_driver(reference_recipe(SPEC, side == "c strict"))
    seeds = np.arange(3, 3 + 8192, dtype=np.uint32) * np.uint32(2654435761)
    for n, block in ((8192, 1024), (5000, 1024)):
        got = driver.reset_digest(seeds[:n], block)
        want = state_digests(SPEC, canonicalize(SPEC, driver.reset(seeds[:n]), "x", "reset"), block)
        assert got.shape == want.shape and (got == want).all()
    native = driver._native_digest is not None if side != "jax" else driver._native
    assert native


def test_c_shim_hashes_natively_only_fields_stored_as_their_spec_dtype() -> None:
    from envforge.backends.c import _digest_shim, parse_struct

    members = parse_struct((SPEC.root / "pong.c").read_text(), "Pong")
    assert "envforge_reset_digest" in _digest_shim(SPEC, members)
    fields = [
        f.model_copy(update={"dtype": "int64"}) if f.name == "tick" else f for f in SPEC.state
    ]
    assert _digest_shim(SPEC.model_copy(update={"state": fields}), members) == ""


def test_short_last_block_and_empty_batch() -> None:
    states = random_states(10)
    assert state_digests(SPEC, states, 4).shape == (3,)
    empty = {k: v[:0] for k, v in states.items()}
    assert state_digests(SPEC, empty, 4).shape == (0,)


def test_isolated_driver_digests_what_its_reset_returns() -> None:
    driver = open_driver(reference_recipe(SPEC, True), True, 60.0)
    try:
        seeds = np.arange(5000, dtype=np.uint32)
        remote = driver.reset_digest(seeds, 1024)
        local = state_digests(SPEC, driver.reset(seeds), 1024)
        assert remote.shape == (5,) and (remote == local).all()
    finally:
        driver.close()


@pytest.mark.parametrize(
    "text,n", [("full", 1 << 32), ("2^25", 1 << 25), ("2**20", 1 << 20), ("1_000", 1000), ("0", 0)]
)
def test_parse_seed_sweep(text: str, n: int) -> None:
    assert parse_seed_sweep(text) == n


@pytest.mark.parametrize("text", ["lots", "2^33", "-1"])
def test_parse_seed_sweep_rejects(text: str) -> None:
    with pytest.raises(BadInput, match="--seed-sweep"):
        parse_seed_sweep(text)


def test_sweep_is_cut_to_the_time_budget_and_says_so() -> None:
    from conftest import PONG_PORT

    from envforge.verify.context import VerifyOptions
    from envforge.verify.runner import verify

    spec = SPEC.model_copy(
        update={"verify": SPEC.verify.model_copy(update={"seed_sweep_seconds": 0.05})}
    )
    report = verify(spec, PONG_PORT.parent, [1], VerifyOptions(scale=0.05))
    [level] = report.levels
    assert level.status == "pass", level.summary
    assert level.stats["reset_sweep_reduced_from"] == round((1 << 25) * 0.05)
    swept = level.stats["reset_sweep_seeds"]
    assert swept < level.stats["reset_sweep_reduced_from"] and swept & (swept - 1) == 0
    assert f"every seed below {swept} resets identically (cut from" in level.summary


def test_a_slow_first_call_does_not_cut_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first digest call pays for compiling (here 1.5 s more, as a slow JIT would): the
    sweep must not be cut on that rate when the warm rate fits the budget."""
    from conftest import PONG_PORT

    from envforge.backends.jax import JaxDriver
    from envforge.verify.context import VerifyOptions
    from envforge.verify.runner import verify

    original = JaxDriver.reset_digest
    calls: list[int] = []

    def slow_first(self, seeds, block):  # type: ignore[no-untyped-def]
        calls.append(len(seeds))
        if len(calls) == 1:
            time.sleep(1.5)
        return original(self, seeds, block)

    monkeypatch.setattr(JaxDriver, "reset_digest", slow_first)
    spec = SPEC.model_copy(
        update={"verify": SPEC.verify.model_copy(update={"seed_sweep_seconds": 8.0})}
    )
    report = verify(spec, PONG_PORT.parent, [1], VerifyOptions(scale=0.125, isolate=False))
    [level] = report.levels
    assert level.status == "pass", level.summary
    assert "reset_sweep_reduced_from" not in level.stats, level.stats
    assert level.stats["reset_sweep_seeds"] == 1 << 22 and sum(calls) == 1 << 22
    assert calls[1] < calls[2] == 1 << 20  # the second call was sized by the first's rate
