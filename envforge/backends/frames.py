"""The host's end of a driver's connection: every frame written and read against a deadline.

A driver server (the isolated child, or the sandboxed server) speaks multiprocessing's
framing: each pickled message follows its length, 4 bytes big-endian (-1 and then 8 bytes for
a message over 2 GiB). ``Connection.poll`` only says that a first byte arrived, and
``Connection.recv`` then blocks until the whole frame is in: a server that announces 100 MB
and sends 8 bytes held the host forever. Here the host's end is non-blocking: a frame is
written and read against one deadline for the whole frame (not per read), and a frame longer
than the reader's cap is refused from its header, before anything is allocated for it. The
server's end keeps multiprocessing's own calls.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Any

import numpy as np

from envforge.spec import EnvSpec

FLOOR_BYTES = 64 << 20
"""What any reply may take (64 MiB): a build's description and source list, a tape of draws,
coverage, explanations, a batch's states. A reply sized by its batch may take more
(``reply_cap``)."""
ROW_SLACK = 4
"""Times the spec's bytes per row a reply may take for each row asked for (pickle's own
framing per array is small; the slack keeps a port's extra keys a contract finding of the
level, not of the connection)."""
DIGEST_BYTES = 64
"""Bytes allowed per reset digest (one per block of seeds)."""
SMALL_FRAME = 16384
"""Up to this size header and payload go out in one write (multiprocessing does the same)."""


class FrameError(Exception):
    """A frame could not be read or written whole."""

    def __init__(self, got: int, size: int | None) -> None:
        self.got = got
        self.size = size
        super().__init__(self.seen())

    def seen(self) -> str:
        """What had arrived (or gone out) of the frame, in words."""
        if self.size is None:
            return f"{self.got} of the 4 header bytes" if self.got else "nothing"
        return f"{self.got:,} of {self.size:,} bytes"


class FrameTimeout(FrameError):
    """The deadline passed before the whole frame was read or written."""


class FrameClosed(FrameError):
    """The other end closed the connection (a dead server): before or inside a frame."""


class FrameTooLong(FrameError):
    """A header announced more than the reader's cap (or a negative length)."""

    def __init__(self, size: int, cap: int) -> None:
        self.cap = cap
        super().__init__(0, size)


def _wait(fd: int, events: int, deadline: float, got: int, size: int | None) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FrameTimeout(got, size)
    poller = select.poll()
    poller.register(fd, events)
    if not poller.poll(max(1, int(remaining * 1000 + 1))):
        raise FrameTimeout(got, size)


def send_frame(fd: int, payload: bytes, deadline: float) -> None:
    """Write ``payload`` as one frame on the non-blocking ``fd`` before ``deadline``
    (``time.monotonic``). A peer that does not read raises FrameTimeout; a dead one, OSError."""
    n = len(payload)
    header = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!iQ", -1, n)
    parts = [header + payload] if n <= SMALL_FRAME else [header, payload]
    sent = 0
    for part in parts:
        view = memoryview(part)
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                _wait(fd, select.POLLOUT, deadline, sent, n)
                continue
            view = view[written:]
            sent += written


def _read_exact(fd: int, count: int, deadline: float, got: int, size: int | None) -> bytes:
    """``count`` bytes; ``got`` and ``size`` only say, in an error, how far the frame got."""
    chunks: list[bytes] = []
    need = count
    while need:
        try:
            chunk = os.read(fd, min(need, 1 << 20))
        except BlockingIOError:
            _wait(fd, select.POLLIN, deadline, got + count - need, size)
            continue
        if not chunk:
            raise FrameClosed(got + count - need, size)
        chunks.append(chunk)
        need -= len(chunk)
    return b"".join(chunks)


def recv_frame(fd: int, deadline: float, cap: int) -> bytes:
    """One frame's payload from the non-blocking ``fd``, whole before ``deadline``, of at most
    ``cap`` bytes. Raises FrameTimeout, FrameClosed or FrameTooLong."""
    (size,) = struct.unpack("!i", _read_exact(fd, 4, deadline, 0, None))
    if size == -1:
        (size,) = struct.unpack("!Q", _read_exact(fd, 8, deadline, 4, None))
    if size < 0 or size > cap:
        raise FrameTooLong(size, cap)
    return _read_exact(fd, size, deadline, 0, size)


def row_bytes(spec: EnvSpec) -> int:
    """Bytes of one row of a transition as the spec shapes it: every state field, the
    observation (as float64), the reward and two flags."""
    state = sum(f.np_dtype.itemsize * f.size for f in spec.state)
    return state + 8 * int(np.prod(spec.observation.shape)) + 8 + 2


def _rows(args: tuple[Any, ...]) -> int:
    """Rows a call asks for: the elements of its arrays (actions of a sequence count each
    step) and the batch of each state it passes."""
    rows = 0
    for arg in args:
        if isinstance(arg, np.ndarray):
            rows += int(arg.size)
        elif isinstance(arg, dict):
            rows += max((len(v) for v in arg.values() if isinstance(v, np.ndarray)), default=0)
    return rows


def reply_cap(spec: EnvSpec, method: str, args: tuple[Any, ...]) -> int:
    """The most bytes the reply to ``method(*args)`` may take: FLOOR_BYTES, plus ROW_SLACK
    times the spec's ``row_bytes`` for each row asked for (digest calls: DIGEST_BYTES per
    block of seeds)."""
    if method == "reset_digest_range":
        _, count, block = args
        return FLOOR_BYTES + DIGEST_BYTES * (int(count) // max(1, int(block)) + 1)
    if method == "reset_digest":
        seeds, block = args
        return FLOOR_BYTES + DIGEST_BYTES * (len(seeds) // max(1, int(block)) + 1)
    return FLOOR_BYTES + ROW_SLACK * _rows(args) * row_bytes(spec)
