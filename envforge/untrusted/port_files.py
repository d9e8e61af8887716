"""What the host reads of a port: only files it listed itself inside the port folder.

Sandboxed code owns what it reports. A port tells the host which files are its sources and,
in an exception's text, where it raised; an agent's command can make any name in ``port/`` a
symlink (to ``/etc/shadow``, into a 0700 folder), a FIFO or a huge file. Whatever the host
shows of a port (port lines in findings, repair prompts, iteration snapshots, ``--out``) is
therefore read from a list the host makes itself: it walks the port folder without following
links and keeps regular files with a single link; names the sandboxed side reports are
matched against that list and otherwise ignored. A listed file is opened one path component
at a time from the port folder, each with ``O_NOFOLLOW`` (so a name swapped for a link after
the listing is refused too), non-blocking, and read at most ``MAX_READ_BYTES``. Links, FIFOs,
sockets, devices and hard links are named as refused, never read or copied.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from envforge.untrusted.regular import NotPlainFile, kind, opened, read_fd, write_file

SKIPPED = frozenset(
    {"__pycache__", "target", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".git"}
)
"""Folders never listed: caches and build output, not the port."""
MAX_READ_BYTES = 512 * 1024
"""What the host reads of one port file to show it (localization, repair prompts)."""
MAX_ENTRIES = 10_000
"""Names looked at in one listing; a port folder with more is listed that far and says so."""
MAX_DEPTH = 16
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotListed(OSError):
    """A name is not (or no longer) a plain regular file inside the listed port folder."""


@dataclass(frozen=True)
class Refused:
    name: str
    """Relative to the listed folder's parent (``port/pong.py``), as the agent knows it."""
    why: str

    def line(self) -> str:
        return f"{self.name}: {self.why}"


@dataclass(frozen=True)
class PortFiles:
    """The regular files of a port folder, as the host listed them."""

    root: Path
    """The folder listed: the port folder, or the folder of a one-file port."""
    names: tuple[str, ...]
    """Regular files with one link, relative to ``root`` (``src/lib.rs``)."""
    folders: tuple[str, ...] = ()
    """Folders below ``root`` that were listed (relative), parents first."""
    refused: tuple[Refused, ...] = ()
    follow_root: bool = True
    """Whether ``root`` itself may be reached through a link (a path the user gave)."""

    @property
    def paths(self) -> list[Path]:
        return [self.root / name for name in self.names]

    def name_of(self, path: str | Path) -> str | None:
        """The listed name a path (absolute, as a driver reports it) stands for, or None."""
        text = os.path.normpath(str(path))
        root = os.path.normpath(str(self.root))
        if not text.startswith(root + os.sep):
            return None
        name = text[len(root) + 1 :]
        return name if name in self.names else None

    def match(self, claimed: Iterable[str | Path]) -> list[Path]:
        """The claimed paths that are listed files, in the claimed order; others are ignored."""
        out: list[Path] = []
        for path in claimed:
            name = self.name_of(path)
            if name is not None and self.root / name not in out:
                out.append(self.root / name)
        return out

    @contextmanager
    def open(self, path: str | Path) -> Iterator[int]:
        """A read-only descriptor of the listed file ``path`` (absolute or relative to root),
        reached without following any link below ``root``; NotListed otherwise."""
        name = self.name_of(path) if Path(path).is_absolute() else os.path.normpath(str(path))
        if name is None or name not in self.names:
            raise NotListed(f"{path}: not a file the host listed in {self.root}")
        with ExitStack() as stack:  # the one rule: no part below root reached through a link
            try:
                fd = stack.enter_context(opened(name, self.root, follow_root=self.follow_root))
            except NotPlainFile as e:  # a name that became a link (or else) since the listing
                raise NotListed(f"{name}: {e.why}") from None
            yield fd

    def read_bytes(self, path: str | Path, limit: int = MAX_READ_BYTES) -> bytes | None:
        """At most ``limit`` bytes of a listed file; None when it is not one."""
        try:
            with self.open(path) as fd:
                return read_fd(fd, limit, path, cut=True)
        except NotListed:
            return None

    def read_text(self, path: str | Path, limit: int = MAX_READ_BYTES) -> str | None:
        """A listed file as text (at most ``limit`` bytes, a note at the end when cut)."""
        data = self.read_bytes(path, limit + 1)
        if data is None:
            return None
        if len(data) > limit:
            cut = data[:limit].decode(errors="replace").rsplit("\n", 1)[0]
            return cut + f"\n... (cut: only the first {limit // 1024} KiB are shown)\n"
        return data.decode(errors="replace")

    def refusal_text(self) -> str:
        """The refused names and why, for a finding or a message to the agent."""
        named = "; ".join(r.line() for r in self.refused)
        return (
            f"{named}. envforge reads, verifies and copies only regular files in a port and "
            "follows no link: replace each with the file itself (or remove it)"
        )


def read_regular(path: str | Path, limit: int = MAX_READ_BYTES) -> bytes | None:
    """At most ``limit`` bytes of ``path`` if it is a regular file with one link, by the one
    rule (no link followed at its last part, no FIFO opened); None for anything else."""
    try:
        with opened(path) as fd:
            return read_fd(fd, limit, path, cut=True)
    except NotPlainFile:
        return None


def list_port(port: Path, follow_root: bool = True) -> PortFiles:
    """The host's own listing of ``port`` (a folder, or a one-file port). ``follow_root``:
    whether ``port`` itself may be a link (a path the user named; an agent's ``port/`` may not).
    """
    if follow_root:
        port = Path(os.path.realpath(port))
    else:  # the folders above are the user's; the port itself may not be a link
        port = Path(os.path.realpath(Path(port).parent)) / Path(port).name
    label = port.name
    try:
        info = os.stat(port, follow_symlinks=follow_root)
    except FileNotFoundError:
        return PortFiles(port, (), (), (), follow_root)
    except OSError as e:
        return PortFiles(port, (), (), (Refused(label, os.strerror(e.errno or 0)),), follow_root)
    if stat.S_ISREG(info.st_mode):
        if info.st_nlink != 1:
            why = f"a hard link ({info.st_nlink} links)"
            return PortFiles(port.parent, (), (), (Refused(label, why),), follow_root)
        return PortFiles(port.parent, (port.name,), (), (), follow_root)
    if not stat.S_ISDIR(info.st_mode):
        return PortFiles(port, (), (), (Refused(label, kind(info.st_mode)),), follow_root)
    names: list[str] = []
    folders: list[str] = []
    refused: list[Refused] = []
    seen = 0
    root_fd = os.open(port, DIR_FLAGS & ~(os.O_NOFOLLOW if follow_root else 0))
    pending: list[tuple[int, str, int]] = [(root_fd, "", 0)]
    try:
        while pending:
            fd, prefix, depth = pending.pop(0)
            try:
                with os.scandir(fd) as entries:
                    listed = sorted(entries, key=lambda e: e.name)
                for entry in listed:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        why = f"more than {MAX_ENTRIES} names: the rest were not listed"
                        refused.append(Refused(os.path.join(label, prefix), why))
                        pending.clear()
                        break
                    rel = os.path.join(prefix, entry.name)
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        if entry.name in SKIPPED:
                            continue
                        if depth + 1 > MAX_DEPTH:
                            refused.append(Refused(os.path.join(label, rel), "nested too deep"))
                            continue
                        try:
                            child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                        except OSError as e:
                            why = os.strerror(e.errno or 0)
                            refused.append(Refused(os.path.join(label, rel), why))
                            continue
                        folders.append(rel)
                        pending.append((child, rel, depth + 1))
                    elif stat.S_ISREG(mode):
                        links = entry.stat(follow_symlinks=False).st_nlink
                        if links == 1:
                            names.append(rel)
                        else:
                            why = f"a hard link ({links} links)"
                            refused.append(Refused(os.path.join(label, rel), why))
                    else:
                        refused.append(Refused(os.path.join(label, rel), kind(mode)))
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in pending:
            os.close(fd)
    return PortFiles(port, tuple(names), tuple(folders), tuple(refused), follow_root)


def copy_port(files: PortFiles, dest: Path) -> None:
    """Copy the listed files (and folders) of ``files`` into the folder ``dest`` (made when
    missing), each read through :meth:`PortFiles.open` and written by the one rule
    (``untrusted/regular.py``: no link at the destination followed); modes (without set-id
    bits) and times kept. A name that is no longer a plain file is left out. Refused names are
    never copied."""
    dest.mkdir(parents=True, exist_ok=True)
    for folder in files.folders:  # empty ones too
        (dest / folder).mkdir(parents=True, exist_ok=True)
    for name in files.names:
        try:
            with files.open(name) as fd:
                info = os.fstat(fd)
                write_file(dest, name, fd, stat.S_IMODE(info.st_mode))
            os.utime(dest / name, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
        except NotListed:
            continue
