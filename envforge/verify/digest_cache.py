"""A reference's reset digests, kept on disk between verifications.

The L1 seed sweep (``verify/level1_properties.py``) compares block digests of every seed's
reset state on both sides. The reference's side is the same for every port verified against it,
and for a C reference it is most of the sweep's cost (pong: about 25 M seeds/s on one core, so
about 3 minutes for all 2^32 seeds). Its digests are therefore kept, one uint64 per block of
``SWEEP_BLOCK`` seeds from seed 0 up (8 MiB for all 2^32 seeds), in
``$ENVFORGE_CACHE/digests`` (default ``~/.cache/envforge/digests``), under a key made of the
driver's :meth:`~envforge.backends.base.Driver.reset_fingerprint` (for C: the hash of the
source, the generated shim, the flags and the compiler that the library build cache uses too),
the digest definition's version, the block size and the canonical fields. A driver with no
fingerprint (Python and gymnasium references) gets no cache.

The file only grows at its end (a sweep appends the blocks it computed past what was kept,
under an exclusive lock), so concurrent verifications (a mutation campaign's workers) share it.
The key is only as good as the fingerprint: a C reference whose behaviour changes through a
file the build does not hash (a header it includes) keeps its old library and its old digests
alike. Against that, and against a damaged file, the sweep always resets its first seeds live
on both sides and drops the file if they disagree with what was kept, and any block whose kept
digest differs from the port's is reset live before it is judged (and the file dropped if the
kept digest was wrong).
By the sandboxes' mount rules a port in one cannot write here (the process sandbox leaves only
its workspace writable, the docker sandbox has its own cache root; not tested here); a port run
unsandboxed can write anything its user can, this file and the compiled reference library alike.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from envforge.backends.base import Driver
from envforge.cache import cache_root
from envforge.native.digest.blocks import DIGEST_VERSION
from envforge.spec import EnvSpec


class DigestCache:
    """Kept block digests of one reference's resets, seeds ``[0, blocks() * block)``."""

    def __init__(self, path: Path, block: int) -> None:
        self.path = path
        self.block = block

    @classmethod
    def for_driver(cls, spec: EnvSpec, driver: Driver, block: int) -> DigestCache | None:
        fingerprint = driver.reset_fingerprint()
        if fingerprint is None:
            return None
        fields = [(f.name, f.dtype, list(f.shape)) for f in spec.state]
        key = json.dumps([fingerprint, DIGEST_VERSION, block, fields])
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        return cls(cache_root() / "digests" / f"{spec.name}-{digest}.u64", block)

    def blocks(self) -> int:
        """How many blocks are kept (whole 8-byte entries; a torn last write is not counted)."""
        try:
            return self.path.stat().st_size // 8
        except OSError:
            return 0

    def seeds(self) -> int:
        return self.blocks() * self.block

    def read(self, first: int, count: int) -> np.ndarray | None:
        """Digests of blocks ``[first, first + count)``, or None if they are not all kept."""
        if first < 0 or count < 0 or first + count > self.blocks():
            return None
        try:
            kept = np.fromfile(self.path, dtype="<u8", count=count, offset=first * 8)
        except OSError:
            return None
        return kept.astype(np.uint64) if len(kept) == count else None

    def extend(self, first: int, digests: np.ndarray) -> None:
        """Keep ``digests`` (blocks ``first``, ``first + 1``, ...) where they continue the file;
        blocks already kept are left as they are, and a gap is never written."""
        if len(digests) == 0:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                size = os.fstat(fh.fileno()).st_size
                kept = size // 8
                if size % 8:  # a torn write: cut it back to whole entries
                    os.ftruncate(fh.fileno(), kept * 8)
                if first <= kept < first + len(digests):
                    fh.write(np.asarray(digests[kept - first :], dtype="<u8").tobytes())
                    fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)
