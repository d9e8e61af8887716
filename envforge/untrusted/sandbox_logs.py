"""Reading and appending to files that sandboxed code could have replaced (its logs).

A sandboxed port owns its scratch directory, so by the time the host reads ``driver.log`` the
name may be a symlink (to a root-only file or ``/proc/<host pid>/environ``: the host would copy
it into a Finding), a FIFO (an open for reading blocks until a writer comes: the verifier would
hang past every timeout), a hard link to another file, or gigabytes long. The host therefore
opens these names without following links and without blocking, accepts only a regular file
with no other links, and reads a bounded tail; anything else is named, never read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from envforge.untrusted.regular import KINDS, NotPlainFile, opened, read_fd

OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _refusal(path: Path, reason: str) -> str:
    return f"[sandbox] {path.name} was not read: {reason}\n"


def _checked(fd: int, path: Path) -> str | None:
    """Why the open file may not be used, or None for a plain regular file."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file (mode {stat.filemode(info.st_mode)})"
    if info.st_nlink != 1:
        return f"it has {info.st_nlink} links (a hard link to another file?)"
    return None


def read_tail(path: Path, limit: int, start: int | None = None) -> str:
    """The last ``limit`` characters of the regular file ``path`` ("" when it does not exist);
    with ``start``, the first ``limit`` characters from byte ``start`` on. Opened by the one
    rule (``untrusted/regular.py``)."""
    try:
        with opened(path) as fd:
            size = os.fstat(fd).st_size
            want = 4 * limit  # bytes: a character is at most four of them in UTF-8
            os.lseek(fd, max(0, size - want) if start is None else start, os.SEEK_SET)
            data = read_fd(fd, want, path, cut=True)
    except NotPlainFile as e:  # a symlink, a socket, a FIFO, a hard link
        if e.why == "not found":
            return ""
        return _refusal(path, f"not a regular file ({e.why})" if e.why in KINDS else e.why)
    text = data.decode(errors="replace")
    return text[-limit:] if start is None else text[:limit]


def append_note(path: Path, text: str) -> bool:
    """Append ``text`` to the regular file ``path`` if it still is one; False when it was not."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | OPEN_FLAGS)
    except OSError:
        return False
    try:
        if _checked(fd, path):
            return False
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    return True
