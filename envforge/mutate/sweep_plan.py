"""The L1 seed sweep every mutant of a campaign gets: fixed before the first mutant runs.

``envforge verify`` cuts its reset sweep to a time budget as it goes. A campaign must not: two
mutants would then be judged by different sweeps, and one verified while the machine was busy
would get a shorter one. So the campaign decides the sweep once. For port mutants it first
fills the reference's digest cache (``verify/digest_cache.py``) up to the default sweep, using
every worker (the reference is not mutated, so no mutant resets it again), then times the
unmutated port's digests and sweeps as many seeds as the default budget allows at that rate:
all 2^32 for pong's JAX port, fewer for a port whose resets are slower. Reference mutants
reset both sides live, so their plan is timed on both.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from envforge.backends.base import Driver
from envforge.backends.recipe import (
    Recipe,
    build_driver,
    open_driver,
    port_recipe,
    reference_recipe,
)
from envforge.mutate.workspace import Target
from envforge.verify.context import VerifyOptions
from envforge.verify.digest_cache import DigestCache
from envforge.verify.seed_sweep import SWEEP_BLOCK, SWEEP_CHUNK, default_sweep

WARM_CHUNK = 1 << 22
"""Seeds per task when the reference's digests are computed ahead of a campaign."""

Note = Callable[[str], None]

_driver: Driver | None = None


def _start_worker(recipe: Recipe) -> None:
    global _driver
    os.environ.update(recipe.env)
    _driver = build_driver(recipe)


def _digests(start: int, count: int) -> np.ndarray:
    assert _driver is not None
    return _driver.reset_digest_range(start, count, SWEEP_BLOCK)


def warm_reference_digests(recipe: Recipe, seeds: int, workers: int, note: Note) -> int:
    """Compute and keep the reference's digests of seeds ``[0, seeds)`` (whole blocks) that
    are not kept yet, ``workers`` processes at a time. Returns how many seeds are kept after.
    A reference that crashes or has no fingerprint leaves the sweep to reset it live."""
    driver = open_driver(recipe, True)
    try:
        cache = DigestCache.for_driver(recipe.spec, driver, SWEEP_BLOCK)
    finally:
        driver.close()
    if cache is None:
        return 0
    end = seeds // SWEEP_BLOCK * SWEEP_BLOCK
    have = cache.seeds()
    if have >= end:
        return have
    note(f"computing the reference's reset digests of seeds {have}..{end - 1} (kept for later)")
    starts = range(have, end, WARM_CHUNK)
    counts = [min(WARM_CHUNK, end - s) for s in starts]
    pool = ProcessPoolExecutor(
        max(1, workers), mp.get_context("spawn"), initializer=_start_worker, initargs=(recipe,)
    )
    try:
        for start, digests in zip(starts, pool.map(_digests, starts, counts), strict=True):
            cache.extend(start // SWEEP_BLOCK, digests)
    except BrokenProcessPool:
        note("the reference crashed while its digests were computed; the sweep resets it live")
    finally:
        pool.shutdown(cancel_futures=True)
    return cache.seeds()


def _seconds_per_seed(driver: Driver) -> float:
    """Best of three timed digest calls of ``SWEEP_CHUNK`` seeds, after one untimed call."""
    driver.reset_digest_range(0, SWEEP_CHUNK, SWEEP_BLOCK)  # compiles, warms caches
    best = float("inf")
    for k in range(1, 4):
        t = time.perf_counter()
        driver.reset_digest_range(k * SWEEP_CHUNK, SWEEP_CHUNK, SWEEP_BLOCK)
        best = min(best, time.perf_counter() - t)
    return best / SWEEP_CHUNK


def plan_sweep(
    target: Target, levels: list[int], options: VerifyOptions, workers: int, note: Note
) -> tuple[int, dict[str, Any]]:
    """(the seed count every mutant sweeps, what the plan measured). ``options.seed_sweep``
    unset: the default sweep, cut to a power of two when the unmutated side(s) would take
    longer than the spec's ``seed_sweep_seconds`` times ``--scale``."""
    spec = target.spec
    total = default_sweep(spec, options.scale)
    if spec.rng.mode != "replicate" or 1 not in levels or total == 0:
        return total, {}
    ref = reference_recipe(spec, options.strict_float)
    info: dict[str, Any] = {"default": total}
    timed = [port_recipe(spec, target.port, options.strict_float)]
    if target.side == "port":
        info["reference_kept"] = warm_reference_digests(ref, total, workers, note)
    else:
        timed.append(ref)
    rate = 0.0
    for recipe in timed:
        driver = open_driver(recipe, True)
        try:
            rate = max(rate, _seconds_per_seed(driver))
        finally:
            driver.close()
    budget = spec.verify.seed_sweep_seconds * options.scale
    info.update(seconds_per_seed=rate, budget_s=budget)
    if rate * total <= budget:
        return total, info
    fits = max(SWEEP_BLOCK, int(budget / rate))
    return min(total, 1 << (fits.bit_length() - 1)), info
