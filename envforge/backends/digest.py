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
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, in place on a uint64 array."""
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _row_words(spec: EnvSpec, state: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Each row's bytes (every field, in spec order) as uint64 words ``[n, w]``, zero-padded."""
    parts = [
        np.ascontiguousarray(np.asarray(state[f.name], dtype=f.np_dtype))
        .reshape(n, -1)
        .view(np.uint8)
        for f in spec.state
    ]
    width = sum(p.shape[1] for p in parts)
    raw = np.zeros((n, -(-width // 8) * 8), np.uint8)
    np.concatenate(parts, axis=1, out=raw[:, :width])
    return raw.view(np.uint64)


def state_digests(spec: EnvSpec, state: dict[str, np.ndarray], block: int) -> np.ndarray:
    """One uint64 per ``block`` consecutive rows (the last block may be short).

    Per row: ``h = (h ^ word) * K_j`` over the row's words (each step a bijection of ``h``, so
    a change in any one word always changes ``h``), then the row index is added and the result
    mixed; a block's digest is the wrapping sum of its rows' mixed hashes."""
    if block < 1:
        raise ValueError("block must be positive")
    n = len(next(iter(state.values())))
    if n == 0:
        return np.zeros(0, np.uint64)
    words = _row_words(spec, state, n)
    with np.errstate(over="ignore"):
        row = np.full(n, _GOLDEN, np.uint64)
        for j in range(words.shape[1]):
            row ^= words[:, j]
            row *= np.uint64((0x9E3779B97F4A7C15 + 2 * j * 0xD1B54A32D192ED03 + 1) % 2**64 | 1)
        row += np.arange(n, dtype=np.uint64) * _GOLDEN
        _mix64(row)
        return np.add.reduceat(row, np.arange(0, n, block))
