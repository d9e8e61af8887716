"""The draw log: every random number one side took during a batched step, in order.

A draw is one scalar: what was asked (its kind and two parameters, e.g. ``integers`` on
``[0, 13)``), what came back (``value``) and where in the source it was asked (``site``). A
call that asks for several numbers (``size=3``) is three draws. The reference's log is the
*tape*: the port is handed its values in the same order, and its own log (what it asked for)
must match the reference's draw for draw (``verify/tape.py``).

Kinds and their parameters ``(a, b)``:

============  =====================================  ==========================================
kind          asked                                  value
============  =====================================  ==========================================
``random``    a float on [0, 1)                      the float
``uniform``   a float on [a, b)                      the float
``integers``  an integer on [a, b)                   the integer
``choice``    an element of a sequence of a items;   the element's *index* (the sequence is the
              b is a fingerprint of the weights p    caller's business)
              (0 when uniform)
``normal``    a normal with mean a, std b            the float
============  =====================================  ==========================================
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KINDS = ("none", "random", "uniform", "integers", "choice", "normal")
"""Index = the kind's code in a log (0: no draw)."""
KIND_CODE = {name: code for code, name in enumerate(KINDS)}


def weights_fingerprint(p: object) -> float:
    """One number that differs for different choice weights (0 for uniform choices)."""
    if p is None:
        return 0.0
    w = np.asarray(p, dtype=np.float64).reshape(-1)
    return float(np.dot(w, np.arange(1, len(w) + 1, dtype=np.float64)))


def describe_draw(kind: int, a: float, b: float) -> str:
    """What a draw asked for, as a person reads it: ``integers[0, 13)``."""
    name = KINDS[kind] if 0 <= kind < len(KINDS) else f"kind {kind}"
    if name == "random":
        return "random() on [0, 1)"
    if name == "uniform":
        return f"uniform[{a:g}, {b:g})"
    if name == "integers":
        return f"integers[{int(a)}, {int(b)})"
    if name == "choice":
        return f"choice of {int(a)}" + (f" (weights fingerprint {b:.6g})" if b else "")
    if name == "normal":
        return f"normal(mean={a:g}, std={b:g})"
    return name


@dataclass
class DrawLog:
    """Draws of a batch of ``B`` envs, at most ``K`` each: arrays ``[B, K]`` and ``count[B]``.

    ``count`` may exceed ``K`` on a port that drew past the end of its tape; the extra draws
    are counted, not stored. ``sites`` maps a site id to ``file:line`` of the code that drew."""

    kind: np.ndarray
    a: np.ndarray
    b: np.ndarray
    value: np.ndarray
    site: np.ndarray
    count: np.ndarray
    sites: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls, batch: int, size: int) -> DrawLog:
        return cls(
            kind=np.zeros((batch, size), np.int8),
            a=np.zeros((batch, size)),
            b=np.zeros((batch, size)),
            value=np.zeros((batch, size)),
            site=np.full((batch, size), -1, np.int32),
            count=np.zeros(batch, np.int32),
        )

    @property
    def size(self) -> int:
        return int(self.kind.shape[1])

    def site_of(self, row: int, j: int) -> str:
        s = int(self.site[row, j]) if j < self.size else -1
        return self.sites[s] if 0 <= s < len(self.sites) else ""

    def describe(self, row: int, j: int) -> str:
        """Draw ``j`` of env ``row``: what was asked, what came back, where."""
        if j >= min(int(self.count[row]), self.size):
            return "no draw"
        text = describe_draw(int(self.kind[row, j]), float(self.a[row, j]), float(self.b[row, j]))
        text += f" = {self.value[row, j]:.17g}"
        where = " <- ".join(part.rsplit("/", 1)[-1] for part in self.site_of(row, j).split(" <- "))
        return f"{text} at {where}" if where else text

    def row_summary(self, row: int, limit: int = 8) -> list[str]:
        n = min(int(self.count[row]), self.size)
        out = [f"#{j} {self.describe(row, j)}" for j in range(min(n, limit))]
        if n > limit:
            out.append(f"... {n - limit} more")
        return out


RUST_DRAWS = Path(__file__).with_name("draws.rs")
"""The draw interface of Rust ports (the trait ``Draws``, a per-env ``Rng``, the logged ``Tape``);
each crate carries a verbatim copy as ``src/draws.rs`` (docs/RUST.md); the Rust translation
prompt shows it for specs that draw inside ``step``."""


def is_rust_draws_copy(path: Path) -> bool:
    """Whether ``path`` is a verbatim copy of the draw interface (envforge's code, not the
    port's: mutation campaigns leave it alone)."""
    try:
        return path.name == RUST_DRAWS.name and path.read_bytes() == RUST_DRAWS.read_bytes()
    except OSError:
        return False


WIDE_FIELD = 64
"""Fields of more elements (a CHIP-8 memory) are folded into ``row_seeds`` as a 16-byte digest
per row: one numpy pass per element cost 31 ms a call for 6 k elements."""


def _row_digests(words: np.ndarray) -> np.ndarray:
    rows = [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in words]
    return np.frombuffer(b"".join(rows), dtype=np.uint64).reshape(len(rows), 2)


def row_seeds(
    state: dict[str, np.ndarray], actions: np.ndarray, salt: int | np.ndarray = 0
) -> np.ndarray:
    """A uint64 per row from the row's state, action and ``salt`` (one, or one per row): the
    seed of the row's draws (same input, same draws, so a failing step replays)."""
    n = len(actions)
    salts = np.broadcast_to(np.asarray(salt, dtype=np.uint64), (n,))
    h = np.uint64(0xCBF29CE484222325) ^ salts
    parts = [np.asarray(state[k]).reshape(n, -1) for k in sorted(state)]
    parts.append(np.asarray(actions).reshape(n, -1))
    with np.errstate(over="ignore"):
        for part in parts:
            words = np.ascontiguousarray(part.astype(np.float64)).view(np.uint64)
            if words.shape[1] > WIDE_FIELD:
                words = _row_digests(words)
            for k in range(words.shape[1]):
                h = (h ^ words[:, k]) * np.uint64(0x100000001B3)
                h ^= h >> np.uint64(29)
    return h
