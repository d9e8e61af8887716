"""Block digests of reset states (the L1 seed sweep's currency), in-process and across the
isolated-driver boundary."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from conftest import PONG_SPEC

from envforge.backends.recipe import open_driver, reference_recipe
from envforge.errors import BadInput
from envforge.native.digest.blocks import state_digests
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


def test_one_changed_value_changes_only_its_block(hashing: str) -> None:
    states = random_states(10_000)
    base = state_digests(SPEC, states, 1000)
    assert base.dtype == np.uint64 and base.shape == (10,)
    for name in ("paddle_yl", "score_r", "rng"):
        changed = {k: v.copy() for k, v in states.items()}
        flat = changed[name].view(np.uint32)
        flat[4321] ^= np.uint32(1)  # one bit of one field of one row
        after = state_digests(SPEC, changed, 1000)
        assert np.flatnonzero(after != base).tolist() == [4]


def test_swapped_rows_and_cancelling_changes_are_seen(hashing: str) -> None:
    states = random_states(64)
    swapped = {k: v[[1, 0, *range(2, 64)]] for k, v in states.items()}
    assert (state_digests(SPEC, swapped, 64) != state_digests(SPEC, states, 64)).all()
    moved = {k: v.copy() for k, v in states.items()}
    moved["tick"][3] += 1
    moved["tick"][5] -= 1  # a plain sum would not notice
    assert (state_digests(SPEC, moved, 64) != state_digests(SPEC, states, 64)).all()


@pytest.fixture(params=["native", "numpy"])
def hashing(request, monkeypatch) -> str:
    """Each test of the digest's definition runs on the C library and on the numpy fallback."""
    from envforge.native.digest import c_digest as digest_native

    if request.param == "numpy":
        monkeypatch.setenv("ENVFORGE_NUMPY_DIGEST", "1")
    assert digest_native.available() == (request.param == "native")
    return request.param


def mixed_fields_and_views(n: int):
    """A spec of fields of 1, 4 and 8 bytes, scalar and shaped, and random states of it as
    strided views into one record array (as a C driver's structs give them)."""
    from envforge.spec.tables import StateField

    fields = [
        StateField(name="flag", dtype="bool"),
        StateField(name="small", dtype="uint8", shape=(3,)),
        StateField(name="wide", dtype="float64", shape=(2,)),
        StateField(name="count", dtype="int64"),
        StateField(name="f", dtype="float32"),
    ]
    spec = SPEC.model_copy(update={"state": fields})
    rng = np.random.default_rng(1)
    rec = np.zeros(
        n,
        [("flag", "?"), ("small", "u1", (3,)), ("wide", "f8", (2,)), ("count", "i8"), ("f", "f4")],
    )
    rec["flag"] = rng.random(n) < 0.5
    rec["small"] = rng.integers(0, 256, (n, 3))
    rec["wide"] = rng.normal(size=(n, 2))
    rec["count"] = rng.integers(-(2**62), 2**62, n)
    rec["f"] = rng.normal(size=n)
    return spec, {f.name: rec[f.name] for f in fields}


@pytest.mark.parametrize("n", [1, 1023, 1024, 5000, 70_000])
@pytest.mark.parametrize("block", [1, 7, 1024, 4096])
def test_the_c_library_gives_the_numpy_digests(n: int, block: int) -> None:
    """The native hash (tiles of 1024 rows, vectorized for this CPU) is the numpy definition,
    for short and whole blocks, tiles that straddle blocks, contiguous and strided words."""
    from envforge.native.digest import blocks as digest
    from envforge.native.digest import c_digest as digest_native

    assert digest_native.available()
    for spec, states in ((SPEC, random_states(n, seed=n)), mixed_fields_and_views(n)):
        words = digest._row_words(spec, states, n)
        want = digest.numpy_digests(words, block)
        got = state_digests(spec, states, block)
        assert got.shape == want.shape == (-(-n // block),)
        assert (got == want).all()


def test_without_a_c_compiler_numpy_hashes_the_same(tmp_path, monkeypatch) -> None:
    from envforge.native.digest import c_digest as digest_native

    states = random_states(5000)
    want = state_digests(SPEC, states, 1024)
    monkeypatch.setenv("ENVFORGE_CACHE", str(tmp_path))  # no library built there yet
    monkeypatch.setenv("CC", "/bin/false")  # and none can be
    digest_native._function.cache_clear()
    try:
        assert not digest_native.available()
        assert (state_digests(SPEC, states, 1024) == want).all()
    finally:
        digest_native._function.cache_clear()


def test_every_byte_of_every_dtype_and_shape_counts(hashing: str) -> None:
    """Fields of 1, 4 and 8 bytes, scalar and shaped, strided or not: one flipped bit anywhere
    changes its row's block, and a strided view hashes like its contiguous copy."""
    spec, views = mixed_fields_and_views(3000)
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
    from envforge.native.c_shim import digest_shim
    from envforge.native.c_struct import parse_struct

    members = parse_struct((SPEC.root / "pong.c").read_text(), "Pong")
    assert "envforge_reset_digest" in digest_shim(SPEC, members)
    fields = [
        f.model_copy(update={"dtype": "int64"}) if f.name == "tick" else f for f in SPEC.state
    ]
    assert digest_shim(SPEC.model_copy(update={"state": fields}), members) == ""


def test_short_last_block_and_empty_batch(hashing: str) -> None:
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

    # the budget scales with --scale like the seed count: 0.4 s here
    settings = {"seed_sweep": 1 << 25, "seed_sweep_seconds": 8.0}
    spec = SPEC.model_copy(update={"verify": SPEC.verify.model_copy(update=settings)})
    report = verify(spec, PONG_PORT.parent, [1], VerifyOptions(scale=0.05))
    [level] = report.levels
    assert level.status == "pass", level.summary
    assert level.stats["reset_sweep_reduced_from"] == round((1 << 25) * 0.05)
    swept = level.stats["reset_sweep_seeds"]
    assert swept < level.stats["reset_sweep_reduced_from"] and swept % 4096 == 0
    assert level.stats["reset_sweep_seconds"] < 3.0
    assert f"every seed below {swept} resets identically (cut from" in level.summary


def test_a_slow_first_call_does_not_cut_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first digest call pays for compiling (here 1.5 s more, as a slow JIT would): the
    sweep must not be cut on that rate when the warm rate fits the budget."""
    from conftest import PONG_PORT

    from envforge.backends.jax import JaxDriver
    from envforge.verify.context import VerifyOptions
    from envforge.verify.runner import verify

    original = JaxDriver.reset_digest_range
    calls: list[int] = []

    def slow_first(self, start, count, block):  # type: ignore[no-untyped-def]
        calls.append(count)
        if len(calls) == 1:
            time.sleep(1.5)
        return original(self, start, count, block)

    monkeypatch.setattr(JaxDriver, "reset_digest_range", slow_first)
    settings = {"seed_sweep": 1 << 25, "seed_sweep_seconds": 64.0}  # 8 s at scale 1/8
    spec = SPEC.model_copy(update={"verify": SPEC.verify.model_copy(update=settings)})
    report = verify(spec, PONG_PORT.parent, [1], VerifyOptions(scale=0.125, isolate=False))
    [level] = report.levels
    assert level.status == "pass", level.summary
    assert "reset_sweep_reduced_from" not in level.stats, level.stats
    assert level.stats["reset_sweep_seeds"] == 1 << 22 and sum(calls) == 1 << 22
    assert calls[1] < calls[2] == 1 << 20  # the second call was sized by the first's rate


# ---- a block's digest is its rows' alone, so a reference's digests can be kept -----------------


@pytest.mark.parametrize("side", ["numpy", "c strict", "jax", "jax isolated"])
def test_block_digests_do_not_depend_on_the_call(side: str) -> None:
    """Blocks hashed in one call, in calls of other sizes, or by seed range: the same digests
    (the sweep reuses a reference's digests computed in other runs, with other call sizes)."""
    from envforge.backends.recipe import build_driver, port_recipe

    block = 512
    seeds = np.arange(40_000, 40_000 + 8 * block, dtype=np.uint32)
    if side == "numpy":
        states = random_states(8 * block)
        whole = state_digests(SPEC, states, block)
        parts = [
            state_digests(SPEC, {k: v[a:b] for k, v in states.items()}, block)
            for a, b in ((0, block), (block, 4 * block), (4 * block, 8 * block))
        ]
        assert (np.concatenate(parts) == whole).all()
        return
    if side.startswith("jax"):
        recipe = port_recipe(SPEC, SPEC.root.parents[1] / "generated/pong/jax")
    else:
        recipe = reference_recipe(SPEC, True)
    driver = open_driver(recipe, True, 60.0) if "isolated" in side else build_driver(recipe)
    try:
        whole = driver.reset_digest(seeds, block)
        parts = [
            driver.reset_digest(seeds[a:b], block) for a, b in ((0, block), (block, 8 * block))
        ]
        assert (np.concatenate(parts) == whole).all()
        by_range = [
            driver.reset_digest_range(40_000 + a, n, block)
            for a, n in ((0, 3 * block), (3 * block, 5 * block))
        ]
        assert (np.concatenate(by_range) == whole).all()
    finally:
        driver.close()


def test_digest_cache_grows_only_at_its_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from envforge.verify.digest_cache import DigestCache

    cache = DigestCache(tmp_path / "d" / "x.u64", 4096)
    assert cache.blocks() == 0 and cache.read(0, 1) is None
    cache.extend(0, np.arange(5, dtype=np.uint64))
    cache.extend(7, np.arange(3, dtype=np.uint64))  # a gap: not written
    assert cache.blocks() == 5 and cache.seeds() == 5 * 4096
    cache.extend(3, np.array([30, 40, 50, 60], np.uint64))  # 3, 4 kept as they were; 5, 6 new
    kept = cache.read(0, 7)
    assert kept is not None and kept.tolist() == [0, 1, 2, 3, 4, 50, 60]
    assert cache.read(5, 3) is None
    with open(cache.path, "ab") as fh:
        fh.write(b"torn")  # a writer killed mid-entry
    assert cache.blocks() == 7
    cache.extend(7, np.array([70], np.uint64))
    kept = cache.read(6, 2)
    assert kept is not None and kept.tolist() == [60, 70]
    cache.drop()
    assert cache.blocks() == 0


def _sweep(monkeypatch, tmp_path, seeds: int):  # type: ignore[no-untyped-def]
    """An in-process L1 reset sweep of the shipped pong port over ``seeds`` seeds; returns the
    level's stats and how many seeds the reference reset."""
    from conftest import PONG_PORT

    from envforge.backends.c import CDriver
    from envforge.backends.recipe import build_driver, port_recipe
    from envforge.verify.checked import CheckedDriver
    from envforge.verify.context import VerifyContext, VerifyOptions
    from envforge.verify.seed_sweep import check_reset_sweep

    monkeypatch.setenv("ENVFORGE_CACHE", str(tmp_path))
    reset: list[int] = []
    original = CDriver.reset_digest

    def counted(self, s, block):  # type: ignore[no-untyped-def]
        reset.append(len(s))
        return original(self, s, block)

    monkeypatch.setattr(CDriver, "reset_digest", counted)
    ref = CheckedDriver(build_driver(reference_recipe(SPEC)))
    port = CheckedDriver(build_driver(port_recipe(SPEC, PONG_PORT.parent)))
    ctx = VerifyContext(SPEC, ref, port, VerifyOptions(seed_sweep=seeds))
    finding, stats = check_reset_sweep(ctx)
    assert finding is None
    return stats, sum(reset)


def test_sweep_keeps_the_reference_digests_and_reuses_them(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from envforge.verify.seed_sweep import SWEEP_LIVE

    n = 1 << 23
    stats, reset = _sweep(monkeypatch, tmp_path, n)
    assert reset == n and stats["reset_sweep_reference_kept"] == 0
    [kept] = (tmp_path / "digests").iterdir()
    assert kept.stat().st_size == n // 4096 * 8
    stats, reset = _sweep(monkeypatch, tmp_path, n)
    assert stats["reset_sweep_seeds"] == n
    # only the first seeds are reset live (they check what was kept)
    assert SWEEP_LIVE <= reset < SWEEP_LIVE + (1 << 20)
    assert stats["reset_sweep_reference_kept"] == n - reset


def test_stale_kept_digests_are_dropped_not_trusted(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A kept digest that is wrong (a reference changed in a way its fingerprint missed) is
    found out where it differs from the port: the block is reset live, agrees, and the file
    is dropped; one wrong among the first seeds drops it before anything is reused."""
    n = 1 << 23
    _sweep(monkeypatch, tmp_path, n)
    [kept] = (tmp_path / "digests").iterdir()
    digests = np.fromfile(kept, dtype="<u8")
    late = digests.copy()
    late[1500] ^= np.uint64(1)  # seeds 6 144 000.. (beyond the live ones)
    late.tofile(kept)
    stats, _ = _sweep(monkeypatch, tmp_path, n)
    assert stats["reset_sweep_seeds"] == n and stats["reset_sweep_blocks_fetched"] == 1
    assert "stale" in stats["reset_sweep_cache_dropped"] and not kept.exists()
    _sweep(monkeypatch, tmp_path, n)
    early = np.fromfile(kept, dtype="<u8")
    early[3] ^= np.uint64(1)
    early.tofile(kept)
    stats, reset = _sweep(monkeypatch, tmp_path, n)
    assert "differ from live" in stats["reset_sweep_cache_dropped"]
    assert reset == n and stats["reset_sweep_reference_kept"] == 0


def test_sweepable_uses_the_rate_of_each_stretch() -> None:
    from envforge.verify.seed_sweep import SWEEP_LIVE, _sweepable

    live, kept_rate = 1e-7, 1e-8
    kept = SWEEP_LIVE + 10**9
    rates = {False: live, True: kept_rate}
    # the kept stretch costs 10 s, then live seeds at 10 M/s
    assert _sweepable(15.0, SWEEP_LIVE, 1 << 32, kept, rates) == kept + 50_000_000
    assert _sweepable(5.0, SWEEP_LIVE, 1 << 32, kept, rates) == SWEEP_LIVE + 500_000_000
    assert _sweepable(100.0, SWEEP_LIVE, kept, kept, rates) == kept
    # no rate seen with kept digests yet: the live one is assumed
    assert _sweepable(5.0, SWEEP_LIVE, 1 << 32, kept, {False: live}) == SWEEP_LIVE + 50_000_000


def test_the_c_reference_digests_on_two_threads_as_on_one() -> None:
    """A chunk of at least THREADED_SEEDS seeds (not a whole number of blocks) is split at a
    block boundary across two threads: the same digests as one call."""
    from pathlib import Path

    from envforge.backends.c import THREADED_SEEDS, CDriver

    driver = CDriver(load_spec(PONG_SPEC), Path("references/pong/pong.c"), strict_float=True)
    assert driver._sweep_threads == 2 or (os.cpu_count() or 1) < 2  # pong.c shares nothing
    seeds = np.arange(THREADED_SEEDS + 3 * 4096 + 100, dtype=np.uint32) * np.uint32(2654435761)
    driver._sweep_threads = 2
    two = driver.reset_digest(seeds, 4096)
    driver._sweep_threads = 1
    one = driver.reset_digest(seeds, 4096)
    assert np.array_equal(two, one)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("", None),
        ("static int calls; int bump(int x) { return x + ++calls; }", "writable data calls"),
        ("int bump(int x) { static int seen = 3; seen += x; return seen; }", "writable data seen"),
        ("#include <stdlib.h>\nint bump(int x) { srand(x); return rand(); }", "calls"),
    ],
)
def test_shared_state_finds_what_two_threads_would_share(tmp_path, body: str, named) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from envforge.native.c_threads import shared_state

    src = tmp_path / "ref.c"
    src.write_text("int pure(int x) { return 2 * x; }\n" + body + "\n")
    lib = tmp_path / "ref.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    found = shared_state(lib)
    assert (found is None) if named is None else (found is not None and found.startswith(named))
