"""The one rule for a file whose path a port, an agent or a workspace could have shaped.

An agent's command, a port at import, or whoever wrote a folder envforge is handed can make any
name a symbolic link (to a root-only file, into a 0700 folder), a FIFO (an open for reading
blocks for good), a device, a hard link to someone else's file, or gigabytes long; and it can
swap a name between envforge's check and its open. So such a file is only ever reached by
these functions:

- it is opened, never stat-then-opened: without blocking, and without following a link at any
  part of the path below the folder it is read from (``below``), each folder opened relative to
  the last; only the folders above ``below`` (the user's) may be links;
- only a regular file is read (with one link, unless the caller says the file is the user's),
  at most a stated number of bytes;
- a copy is written the same way at the destination: folders below its root opened without
  following links (made when missing), an existing name removed first and the file created new
  (``O_EXCL``), so nothing is ever written through a link planted there.

Every refusal is :class:`NotPlainFile`, whose ``why`` says what the name was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CHUNK = 1 << 20


class NotPlainFile(OSError):
    """A name that is not (or no longer) a plain regular file envforge may read or write."""

    def __init__(self, name: str | Path, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = str(name)
        self.why = why


KINDS = ("a symbolic link", "a folder", "a FIFO", "a socket", "a device")
"""What :func:`kind` calls a name that is not a regular file."""


def kind(mode: int) -> str:
    """What a name that is not a regular file is, in a few words."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return f"not a regular file (mode {stat.filemode(mode)})"


def _why(e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "a symbolic link (not followed)"
    if e.errno == errno.ENOTDIR:
        return "below a name that is not a folder (a file, or a symbolic link: not followed)"
    if e.errno == errno.ENXIO:
        return "a socket"
    if e.errno == errno.ENOENT:
        return "not found"
    return os.strerror(e.errno) if e.errno else str(e)


def _parts(relative: str | Path) -> list[str]:
    parts = [p for p in Path(relative).parts if p not in ("", ".")]
    if not parts or ".." in parts or Path(relative).is_absolute():
        raise NotPlainFile(relative, "not a name inside its folder")
    return parts


def _make_folder(name: str, parent: int) -> None:
    """``name`` in the folder ``parent`` as a folder: made, or made new where it was not one."""
    try:
        mode = os.lstat(name, dir_fd=parent).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        return
    if mode is not None:
        os.unlink(name, dir_fd=parent)  # a link or a file: removed, never followed
    os.mkdir(name, 0o755, dir_fd=parent)


@contextlib.contextmanager
def _folder_fds(root: Path, parts: list[str], follow_root: bool, create: bool) -> Iterator[int]:
    """The descriptor of ``root/parts...``: every part opened relative to the last without
    following a link; ``root`` itself followed if ``follow_root``. ``create``: a missing part
    is made, and one that is a link or a file is removed and made new (a destination)."""
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(root, DIR_FLAGS & ~(os.O_NOFOLLOW if follow_root else 0)))
            for part in parts:
                if create:
                    _make_folder(part, fds[-1])
                fds.append(os.open(part, DIR_FLAGS, dir_fd=fds[-1]))
        except OSError as e:
            raise NotPlainFile(Path(root, *parts), _why(e)) from None
        yield fds[-1]
    finally:
        for fd in reversed(fds):
            os.close(fd)


@contextlib.contextmanager
def opened(
    name: str | Path,
    below: Path | None = None,
    *,
    follow_root: bool = True,
    one_link: bool = True,
) -> Iterator[int]:
    """A read-only descriptor of the regular file ``name``. With ``below``, ``name`` is
    relative to that folder and no part below it is followed (``below`` itself only if
    ``follow_root``); without, ``name`` is a path whose last part is not followed.
    ``one_link``: refuse a file with other hard links (it may be someone else's)."""
    if below is None:
        path = Path(name)
        below, parts = path.parent, [path.name]
    else:
        parts = _parts(name)
    shown = Path(below, *parts)
    with _folder_fds(below, parts[:-1], follow_root, create=False) as folder:
        try:
            fd = os.open(parts[-1], FILE_FLAGS, dir_fd=folder)
        except OSError as e:
            raise NotPlainFile(shown, _why(e)) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotPlainFile(shown, kind(info.st_mode))
            if one_link and info.st_nlink != 1:
                raise NotPlainFile(shown, f"a hard link ({info.st_nlink} links)")
            yield fd
        finally:
            os.close(fd)


def read_fd(fd: int, limit: int, name: str | Path = "file", cut: bool = False) -> bytes:
    """At most ``limit`` bytes of an open file; past them NotPlainFile, or with ``cut`` the
    first ``limit`` (what is shown of a file need not be all of it)."""
    chunks, got = [], 0
    while got <= limit:  # one byte past the limit tells a file that is too large
        chunk = os.read(fd, min(CHUNK, limit + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > limit and not cut:
        raise NotPlainFile(name, f"over the {limit} bytes allowed")
    return b"".join(chunks)[:limit]


def read_file(
    name: str | Path,
    limit: int,
    below: Path | None = None,
    *,
    follow_root: bool = True,
    one_link: bool = True,
) -> bytes:
    """The bytes of a regular file reached by :func:`opened`, at most ``limit``."""
    with opened(name, below, follow_root=follow_root, one_link=one_link) as fd:
        return read_fd(fd, limit, Path(below or "", name))


def write_file(root: Path, relative: str | Path, data: bytes | int, mode: int = 0o644) -> None:
    """Write ``root/relative`` as a new regular file: the folders below ``root`` opened without
    following a link (made when missing), an existing file, link or FIFO of that name removed
    first, the file created new. ``data``: the bytes, or an open descriptor to copy from."""
    parts = _parts(relative)
    with _folder_fds(root, parts[:-1], follow_root=True, create=True) as folder:
        try:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISDIR(os.lstat(parts[-1], dir_fd=folder).st_mode):
                    raise NotPlainFile(Path(root, *parts), "a folder")
                os.unlink(parts[-1], dir_fd=folder)  # a link is removed, not followed
            out = os.open(parts[-1], WRITE_FLAGS, 0o600, dir_fd=folder)
        except OSError as e:  # EEXIST: a name made again in between; ELOOP: a link
            raise NotPlainFile(Path(root, *parts), _why(e)) from None
        try:
            if isinstance(data, int):
                while chunk := os.read(data, CHUNK):
                    while chunk:
                        chunk = chunk[os.write(out, chunk) :]
            else:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, mode & 0o777)
        finally:
            os.close(out)


def copy_file(
    source: str | Path,
    root: Path,
    relative: str | Path,
    limit: int,
    below: Path | None = None,
    *,
    follow_root: bool = True,
    one_link: bool = True,
) -> None:
    """Copy a regular file reached by :func:`opened` to ``root/relative`` by :func:`write_file`
    (its mode kept, without set-id bits); NotPlainFile when the source is over ``limit``."""
    with opened(source, below, follow_root=follow_root, one_link=one_link) as fd:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise NotPlainFile(Path(below or "", source), f"over the {limit} bytes allowed")
        write_file(root, relative, read_fd(fd, limit, source), stat.S_IMODE(info.st_mode))


def fresh_folder(root: Path, relative: str | Path) -> Path:
    """``root/relative`` as a new empty folder: the folders below ``root`` made where missing
    (a link or file in their place replaced), whatever had the name removed first (a folder's
    tree without following its links, a link itself rather than what it names)."""
    parts = _parts(relative)
    with _folder_fds(root, parts[:-1], follow_root=True, create=True) as parent:
        try:
            try:
                mode: int | None = os.lstat(parts[-1], dir_fd=parent).st_mode
            except FileNotFoundError:
                mode = None
            if mode is not None and stat.S_ISDIR(mode):
                shutil.rmtree(parts[-1], dir_fd=parent)
            elif mode is not None:
                os.unlink(parts[-1], dir_fd=parent)
            os.mkdir(parts[-1], 0o755, dir_fd=parent)
        except OSError as e:
            raise NotPlainFile(Path(root, *parts), _why(e)) from None
    return Path(root, *parts)


def append_file(root: Path, relative: str | Path, text: str) -> None:
    """Append ``text`` to ``root/relative`` (made when missing), reached as :func:`write_file`
    reaches its file: no link below ``root`` followed, only a regular file appended to."""
    parts = _parts(relative)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    with _folder_fds(root, parts[:-1], follow_root=True, create=True) as folder:
        try:
            fd = os.open(parts[-1], flags, 0o644, dir_fd=folder)
        except OSError as e:
            raise NotPlainFile(Path(root, *parts), _why(e)) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise NotPlainFile(Path(root, *parts), kind(info.st_mode))
            data = memoryview(text.encode())
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
