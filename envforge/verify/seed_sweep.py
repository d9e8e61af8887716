"""Level 1's all-seeds reset sweep: does the port reset like the reference for every seed?

Sampled seeds miss a port that differs on a handful of seeds in 2^32; this sweep resets every
seed in ``[0, N)`` on both sides, where each side runs, and compares block digests
(``Driver.reset_digest``); only blocks whose digests differ are fetched and compared field by
field. The reference's digests are kept between runs (``verify/digest_cache.py``). Without
``--seed-sweep`` it runs within a time budget (``seed_sweep_seconds``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from envforge.native.digest import c_digest as digest_native
from envforge.spec import EnvSpec
from envforge.verify.context import VerifyContext, reset_mismatch
from envforge.verify.digest_cache import DigestCache
from envforge.verify.findings import Finding

SWEEP_CHUNK = 1 << 20
"""Seeds per reset_digest call in the seed sweep."""
SWEEP_BLOCK = 4096
"""Seeds per digest: where two digests differ, this many states are fetched and compared."""
SWEEP_LIVE = 3 * SWEEP_CHUNK
"""Seeds below this are always reset live on both sides: they check a reference's kept
digests, and give the live rate at least one call of a size seen before (a warm one)."""


def default_sweep(spec: EnvSpec, scale: float) -> int:
    """The spec's sweep size times ``--scale``, within the uint32 seed space."""
    return min(max(0, round(spec.verify.seed_sweep * scale)), 1 << 32)


def sweep_size(ctx: VerifyContext) -> int:
    """Seeds in the sweep: ``--seed-sweep`` if given, else :func:`default_sweep`."""
    if ctx.options.seed_sweep is not None:
        return min(ctx.options.seed_sweep, 1 << 32)
    return default_sweep(ctx.spec, ctx.options.scale)


def _sweep_call_size(seeds: float) -> int:
    """The largest power-of-two number of whole digest blocks not above ``seeds``, between one
    block and ``SWEEP_CHUNK``."""
    blocks = max(1, int(seeds) // SWEEP_BLOCK)
    return min(SWEEP_CHUNK, SWEEP_BLOCK << (blocks.bit_length() - 1))


def check_reset_sweep(ctx: VerifyContext) -> tuple[Finding | None, dict[str, Any]]:
    """Every seed in ``[0, N)`` must reset to the reference's state (``replicate`` mode).

    Sampled seeds miss a port that differs on a handful of seeds (a zero guard in a seed hash,
    ``<`` against ``<=`` on one drawn value); only an exhaustive sweep sees a port that differs
    on two seeds in 2^32. Each side hashes its reset states in blocks where it runs
    (``Driver.reset_digest``), both sides in parallel; only blocks whose digests differ are
    fetched and compared with the spec's comparison. Small seeds come first: they are the ones
    users pass. The reference's digests are kept between runs (``verify/digest_cache.py``), so
    after the first sweep of a C reference only the port resets; the first ``SWEEP_LIVE``
    seeds are always reset live on both sides and check what was kept.

    Without ``--seed-sweep``, N is the spec's ``seed_sweep`` (all 2^32 seeds unless the spec
    says otherwise) times ``--scale``, lowered (to whole blocks of ``SWEEP_BLOCK`` seeds) to
    what the measured rates show fits in ``seed_sweep_seconds`` times ``--scale`` (a Python
    reference resets thousands of times slower than C; a cold cache costs the reference's time
    too); the stats and the level's summary say so. ``--seed-sweep N`` sweeps exactly N."""
    total = goal = sweep_size(ctx)
    if ctx.spec.rng.mode != "replicate" or total <= 0:
        return None, {}
    # built here, where the cache is writable: a sandboxed driver can only load it
    digest_native.available()
    budgeted = ctx.options.seed_sweep is None
    budget = ctx.spec.verify.seed_sweep_seconds * ctx.options.scale
    cache = DigestCache.for_driver(ctx.spec, ctx.ref, SWEEP_BLOCK)
    kept = cache.seeds() if cache is not None else 0
    stats: dict[str, Any] = {}
    start_time = time.perf_counter()
    fetched = reused = start = calls = 0
    size = SWEEP_BLOCK
    sizes: set[int] = set()
    rates: dict[bool, float] = {}  # best seconds per seed, by whether the reference was kept
    cold: dict[bool, float] = {}  # the same from calls of a new size, until warm ones are seen
    with ThreadPoolExecutor(2) as pool:
        while start < total:
            chunk_start = time.perf_counter()
            count = min(total, start + size) - start
            first, whole = start // SWEEP_BLOCK, count // SWEEP_BLOCK
            ref_d = None
            if cache is not None and start >= SWEEP_LIVE and count % SWEEP_BLOCK == 0:
                ref_d = cache.read(first, whole)
            from_cache = ref_d is not None
            args = (start, count, SWEEP_BLOCK)
            ref_f = None if from_cache else pool.submit(ctx.ref.reset_digest_range, *args)
            port_f = pool.submit(ctx.port.reset_digest_range, *args)
            if ref_f is not None:
                ref_d = ref_f.result()
            port_d = port_f.result()
            assert ref_d is not None
            if from_cache:
                reused += count
            elif cache is not None:
                overlap = min(whole, cache.blocks() - first)  # kept blocks this call recomputed
                seen = cache.read(first, overlap) if overlap > 0 else None
                if seen is not None and not np.array_equal(seen, ref_d[:overlap]):
                    _drop_cache(cache, stats, "kept digests differ from live resets")
                    cache = None
                else:
                    cache.extend(first, ref_d[:whole])
            for b in np.flatnonzero(ref_d != port_d):
                low = start + int(b) * SWEEP_BLOCK
                block = np.arange(low, min(start + count, low + SWEEP_BLOCK), dtype=np.uint64)
                block = block.astype(np.uint32)
                fetched += 1
                # a time-budgeted sweep's planned end depends on machine speed: not in the text
                span = f"over seeds 0..{total - 1}" if not budgeted else "from seed 0"
                how = f" (found by the reset sweep {span})"
                finding = reset_mismatch(
                    ctx, 1, block, ctx.ref.reset(block), ctx.port.reset(block), suffix=how
                )
                if finding is not None:
                    stats.update(reset_sweep_seeds=int(block[0]) + len(block))
                    return finding, stats
                if from_cache and cache is not None:
                    live = ctx.ref.reset_digest(block, SWEEP_BLOCK)
                    if live[0] != ref_d[b]:
                        _drop_cache(cache, stats, f"a kept digest (seed {block[0]}) is stale")
                        cache = None
            start += count
            calls += 1
            rate = (time.perf_counter() - chunk_start) / count
            size = SWEEP_CHUNK
            fresh = count not in sizes  # a call of a new size may have compiled
            sizes.add(count)
            if budgeted and start < goal:
                # Keep within the time budget; the plan (``total``) is made anew after every
                # call from the rates seen so far, so an early pessimistic one is not final.
                # The first call is no guide to the rate (call overhead; a JAX driver
                # compiling): it cuts nothing unless the budget is already spent, but the next
                # call is kept to what half the budget left would allow even at that rate (a
                # slow Python reference is then measured on a real chunk). A call of a size not
                # seen before may have compiled too: it cuts only if the next chunk alone would
                # not fit. Calls of a size seen before give the rates (with and without kept
                # reference digests) that judge the whole rest.
                elapsed = time.perf_counter() - start_time
                left = budget - elapsed
                if calls == 1:
                    fits = start if left <= 0 else goal
                    size = _sweep_call_size(left / 2 / max(rate, 1e-12))
                else:
                    if not fresh:
                        rates[from_cache] = min(rates.get(from_cache, rate), rate)
                    cold.setdefault(from_cache, rate)
                    known = {**cold, **rates}
                    horizon = min(goal, start + SWEEP_CHUNK) if fresh else goal
                    fits = goal
                    if _sweepable(left, start, horizon, kept, known) < horizon:
                        fits = _sweepable(left, start, goal, kept, known)
                total = goal if fits >= goal else max(start, fits // SWEEP_BLOCK * SWEEP_BLOCK)
    if total < goal:
        stats["reset_sweep_reduced_from"] = goal
    stats.update(
        reset_sweep_seeds=total,
        reset_sweep_blocks_fetched=fetched,
        reset_sweep_reference_kept=reused,
        reset_sweep_seconds=round(time.perf_counter() - start_time, 2),
    )
    return None, stats


def _drop_cache(cache: DigestCache, stats: dict[str, Any], why: str) -> None:
    """Forget a reference's kept digests that proved wrong (the sweep goes on live)."""
    cache.drop()
    stats["reset_sweep_cache_dropped"] = why


def _sweepable(seconds: float, start: int, end: int, kept: int, rates: dict[bool, float]) -> int:
    """The seed up to which ``[start, end)`` can be swept in ``seconds``: seeds whose reference
    digests are kept (from ``SWEEP_LIVE`` up to ``kept``) at the rate seen with kept digests
    (the live rate until one was seen), the rest at the live rate."""
    live = rates.get(False, rates.get(True, 0.0))
    segments = (
        (0, SWEEP_LIVE, live),
        (SWEEP_LIVE, kept, rates.get(True, live)),
        (kept, end, live),
    )
    at = start
    for low, high, rate in segments:
        a, b = max(low, at), min(high, end)
        if b <= a:
            continue
        if (b - a) * rate > seconds:
            return a + int(max(0.0, seconds) / max(rate, 1e-12))
        seconds -= (b - a) * rate
        at = b
    return end
