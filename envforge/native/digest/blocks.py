"""Block digests of canonical states: compare millions of resets without moving the states.

A driver that resets a million seeds would have to send tens of megabytes back to the verifier
for a plain comparison. Instead the driver (in its own process) hashes the canonical states in
blocks of consecutive rows and sends one 64-bit digest per block. The verifier compares digests
and fetches the states of a block only where the two sides' digests differ, so the real
comparison (tolerances, excuses) still decides.

The hash is defined on 32-bit words so that it vectorizes in numpy and can be computed natively
where the states are made (the C shim, a jitted JAX function) without 64-bit integers:

* a row's **words**: every field in spec order, each value's bytes as little-endian 32-bit
  words (one per 4-byte value, two per 8-byte value, low word first); 1-byte values (uint8,
  bool) widened to one word;
* two **lanes** per row, ``h = (h ^ word) * K_j`` over the words (``K_j`` odd: each step is a
  bijection of ``h``, so a change in any one word always changes both lanes), then the row's
  index ``i`` within its block is folded in and the lane finalized (murmur3's ``fmix32``, a
  bijection): ``lo = fmix32(lo + i * 0x9E3779B9)``, ``hi = fmix32(hi ^ (i * 0x85EBCA6B))``;
* a block's digest: the wrapping uint32 sums of its rows' lanes, ``hi << 32 | lo``.

One changed row always changes its block's digest; several changed rows (or swapped rows) leave
it unchanged only by a chance of about 2^-32 per lane. A block's digest depends on its rows
alone, not on which call computed it or where in the call it sat, so the verifier can keep a
reference's digests and reuse them (``verify/digest_cache.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envforge.native.digest import c_digest as digest_native
from envforge.spec import EnvSpec

DIGEST_VERSION = 2
"""Raised whenever the definition above changes (kept digests of an older one are not used)."""
LANE_START = (0x7F4A7C15, 0x9E3779B9)
ROW_MULT = (0x9E3779B9, 0x85EBCA6B)
"""The row index is multiplied by these before it is folded into lane 0 (added) and 1 (xored)."""
_CHUNK = 1 << 14
"""Rows hashed at a time: the lanes of a chunk stay in cache between word steps."""


def word_key(j: int, lane: int) -> int:
    """The multiplier of word ``j`` in lane ``lane`` (odd, so multiplying is a bijection)."""
    return ((0x9E3779B9 + (2 * j + lane) * 0x85EBCA6B) % 2**32) | 1


def fmix32(x: Any) -> Any:
    """murmur3's 32-bit finalizer on a uint32 array, numpy or JAX (a new array)."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> np.uint32(13))
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> np.uint32(16))


def fold_index(lo: Any, hi: Any, index: Any) -> tuple[Any, Any]:
    """Each row's lanes with its index within its block folded in and finalized (numpy or JAX
    uint32 arrays; wrapping arithmetic)."""
    return (
        fmix32(lo + index * np.uint32(ROW_MULT[0])),
        fmix32(hi ^ (index * np.uint32(ROW_MULT[1]))),
    )


def _row_words(spec: EnvSpec, state: dict[str, np.ndarray], n: int) -> list[np.ndarray]:
    """Each row's 32-bit words, one ``[n]`` column per word, in spec field order."""
    words: list[np.ndarray] = []
    for f in spec.state:
        a = np.asarray(state[f.name], dtype=f.np_dtype).reshape(n, -1)
        size = a.dtype.itemsize
        if size % 4:
            a = a.view(f"u{size}").astype(np.uint32)
        elif size == 4:
            a = a.view(np.uint32)  # a strided view (a C driver's struct field) stays one
        else:
            a = np.ascontiguousarray(a).view(np.uint32)
        words.extend(a[:, k] for k in range(a.shape[1]))
    return words


def finish(lo: np.ndarray, hi: np.ndarray, block: int) -> np.ndarray:
    """Block digests from the rows' lanes before the index is folded in (``[n]`` uint32 each)."""
    n = len(lo)
    with np.errstate(over="ignore"):
        lo, hi = fold_index(lo, hi, np.arange(n, dtype=np.uint32) % np.uint32(block))
    starts = np.arange(0, n, block)
    return join(
        np.add.reduceat(lo, starts, dtype=np.uint32), np.add.reduceat(hi, starts, dtype=np.uint32)
    )


def join(lo_sums: np.ndarray, hi_sums: np.ndarray) -> np.ndarray:
    """Block digests from the blocks' uint32 lane sums."""
    return (np.asarray(hi_sums, np.uint64) << np.uint64(32)) | np.asarray(lo_sums, np.uint64)


def state_digests(spec: EnvSpec, state: dict[str, np.ndarray], block: int) -> np.ndarray:
    """One uint64 per ``block`` consecutive rows (the last block may be short)."""
    if block < 1:
        raise ValueError("block must be positive")
    n = len(next(iter(state.values())))
    if n == 0:
        return np.zeros(0, np.uint64)
    words = _row_words(spec, state, n)
    if digest_native.available():
        keys = np.array([(word_key(j, 0), word_key(j, 1)) for j in range(len(words))], np.uint32)
        return join(*digest_native.lane_sums(words, keys, LANE_START, ROW_MULT, block))
    return numpy_digests(words, block)


def numpy_digests(words: list[np.ndarray], block: int) -> np.ndarray:
    """``state_digests`` of rows given as word columns, in numpy (the definition, and the
    fallback where the C library cannot be built)."""
    n = len(words[0])
    keys = [(np.uint32(word_key(j, 0)), np.uint32(word_key(j, 1))) for j in range(len(words))]
    lo = np.empty(n, np.uint32)
    hi = np.empty(n, np.uint32)
    with np.errstate(over="ignore"):
        for start in range(0, n, _CHUNK):
            end = min(n, start + _CHUNK)
            a, b = lo[start:end], hi[start:end]
            a.fill(LANE_START[0])
            b.fill(LANE_START[1])
            for w, (k0, k1) in zip(words, keys, strict=True):
                part = w[start:end]
                a ^= part
                a *= k0
                b ^= part
                b *= k1
    return finish(lo, hi, block)
