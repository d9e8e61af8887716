"""The process sandbox's file system: a new root holding only what the code needs.

Run in the child, inside its own mount namespace, before the read-only remount (see
envforge/sandbox/confine.py). A tmpfs mounted on an empty staging directory becomes the new
root: the host paths the code needs are bind-mounted into it at their own paths (the same list
the docker sandbox mounts: system directories, the loader's files in ``/etc``, the interpreter
and its packages, envforge's own package, the Rust toolchain and the host's built modules and
vendored crates, the port or workspace), plus ``/dev`` (with a private tmpfs on ``/dev/shm``),
``/proc``, ``/sys``, a private ``/tmp`` and a ``passwd`` naming only root and the sandbox user.
Then ``pivot_root`` into it and detach the old root: nothing else of the host file system
(``/root``, ``/home``, the checkout, other jobs' scratch folders, ``/etc/shadow``) has a path any
more. The staging directory is the host's, empty, made and removed by the sandbox per child.
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 2, 4, 4096, 16384
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Top-level names that are symlinks on merged-/usr systems (``/bin -> usr/bin``)."""
SPECIAL = ("/dev", "/proc", "/sys")
OLD_ROOT = ".old-root"

_libc = ctypes.CDLL(None, use_errno=True)


class ViewError(OSError):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise ViewError(err, f"{what}: {os.strerror(err)}")


def _mount(
    source: str | None, target: str, flags: int, fstype: str | None = None, data: str = ""
) -> None:
    result = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(result, f"mount {target}")


def _pivot_root(new: str, old: str) -> None:
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise ViewError(0, f"pivot_root: unknown system call number on {platform.machine()}")
    _check(_libc.syscall(ctypes.c_long(number), new.encode(), old.encode()), "pivot_root")


def _make_target(root: str, path: str, like: str) -> str:
    """``root + path``, created (directories above it too) as a directory or an empty file as
    ``like`` is. Only ever inside the new root's own tmpfs: a path inside another bind mount
    exists already, since it is the same host path."""
    target = root + path
    if not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(like):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    return target


def _bind(root: str, path: str) -> None:
    _mount(path, _make_target(root, path, path), MS_BIND | MS_REC)


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _passwd(root: str) -> None:
    uid, gid = os.getuid(), os.getgid()
    users = "root:x:0:0:root:/root:/bin/sh\n"
    groups = "root:x:0:\n"
    if uid != 0:
        users += f"sandbox:x:{uid}:{gid}:envforge sandbox:/tmp:/bin/sh\n"
        groups += f"sandbox:x:{gid}:\n"
    for name, text in (("passwd", users), ("group", groups)):
        target = f"{root}/etc/{name}"
        if not os.path.lexists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            Path(target).write_text(text)


def enter_view(
    staging: str,
    read_only: tuple[str, ...],
    writable: tuple[str, ...],
    tmp_mb: int,
    shm_mb: int,
) -> None:
    """Make a root of ``read_only`` and ``writable`` host paths (and the specials) on
    ``staging`` and pivot into it; the read-only remount comes after (confine.py)."""
    cwd = os.getcwd()
    _mount("tmpfs", staging, MS_NOSUID | MS_NODEV, "tmpfs", "size=8m,mode=755")
    for name in SYSTEM_LINKS:
        host = f"/{name}"
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{staging}/{name}")
    for special in SPECIAL:
        if os.path.isdir(special):
            _bind(staging, special)
    if os.path.isdir("/dev/shm"):
        shm = f"size={shm_mb}m,mode=1777"  # private: nothing written there outlives the child
        _mount("tmpfs", f"{staging}/dev/shm", MS_NOSUID | MS_NODEV, "tmpfs", shm)
    tmp = _make_target(staging, "/tmp", "/")
    _mount("tmpfs", tmp, MS_NOSUID | MS_NODEV, "tmpfs", f"size={tmp_mb}m,mode=1777")
    paths: list[str] = []
    for path in (*read_only, *writable):
        if os.path.islink(path) and not os.path.lexists(staging + path):
            os.makedirs(os.path.dirname(staging + path), exist_ok=True)
            os.symlink(os.readlink(path), staging + path)  # /etc/localtime -> ...
        real = os.path.realpath(path)
        if os.path.exists(real) and not _inside(real, SPECIAL) and real != "/":
            paths.append(real)
    for path in sorted(dict.fromkeys(paths), key=lambda p: p.count("/")):
        _bind(staging, path)
    _passwd(staging)
    os.chdir(staging)
    os.mkdir(OLD_ROOT)
    _pivot_root(".", OLD_ROOT)
    os.chdir("/")
    _check(_libc.umount2(f"/{OLD_ROOT}".encode(), MNT_DETACH), "umount old root")
    os.rmdir(f"/{OLD_ROOT}")
    if os.path.isdir(cwd):  # the workspace or scratch directory: always in the view
        os.chdir(cwd)
