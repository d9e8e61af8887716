"""Block digests of canonical states: compare millions of resets without moving the states.

A driver that resets a million seeds would have to send tens of megabytes back to the verifier
for a plain comparison. Instead the driver (in its own process) hashes the canonical states in
blocks of consecutive rows and sends one 64-bit digest per block. The verifier compares digests
and fetches the states of a block only where the two sides' digests differ, so the real
comparison (tolerances, excuses) still decides. Equal digests mean equal bytes up to a 2^-64
chance per block.

The hash is position-sensitive (a row's index is mixed in before the block sum), so two rows
that are swapped, or two differences that would cancel in a plain sum, still change the digest.
"""

from __future__ import annotations

import numpy as np

from envforge.spec import EnvSpec

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
_CHUNK = 1 << 14
"""Rows hashed at a time: the 32-bit lanes of a chunk stay in cache between word steps."""


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, in place on a uint64 array."""
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _odd(j: int, lane: int) -> np.uint32:
    """The multiplier of word ``j`` in hash lane ``lane`` (odd, so multiplying is a bijection)."""
    return np.uint32(((0x9E3779B9 + (2 * j + lane) * 0x85EBCA6B) % 2**32) | 1)


def _row_words(spec: EnvSpec, state: dict[str, np.ndarray], n: int) -> list[np.ndarray]:
    """Each row's values as 32-bit words, one ``[n]`` column per word, in spec field order.

    4- and 8-byte values give their bytes (one or two words each); 1-byte values (uint8, bool)
    are widened."""
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


def state_digests(spec: EnvSpec, state: dict[str, np.ndarray], block: int) -> np.ndarray:
    """One uint64 per ``block`` consecutive rows (the last block may be short).

    Per row, two 32-bit lanes each run ``h = (h ^ word) * K_j`` over the row's 32-bit words
    (each step a bijection of ``h``, so a change in any one word always changes both lanes; 32-bit
    multiplies vectorize where 64-bit ones do not); the lanes are joined into 64 bits, the row
    index added and the result mixed; a block's digest is the wrapping sum of its rows' mixed
    hashes."""
    if block < 1:
        raise ValueError("block must be positive")
    n = len(next(iter(state.values())))
    if n == 0:
        return np.zeros(0, np.uint64)
    words = _row_words(spec, state, n)
    keys = [(_odd(j, 0), _odd(j, 1)) for j in range(len(words))]
    row = np.empty(n, np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, n, _CHUNK):
            end = min(n, start + _CHUNK)
            lo = np.full(end - start, 0x7F4A7C15, np.uint32)
            hi = np.full(end - start, 0x9E3779B9, np.uint32)
            for w, (k0, k1) in zip(words, keys, strict=True):
                part = w[start:end]
                lo ^= part
                lo *= k0
                hi ^= part
                hi *= k1
            out = row[start:end]
            np.left_shift(hi, _S32, out=out, dtype=np.uint64, casting="unsafe")
            out |= lo
        row += np.arange(n, dtype=np.uint64) * _GOLDEN
        _mix64(row)
        return np.add.reduceat(row, np.arange(0, n, block))
