"""Confinement of a process-sandbox child with Linux namespaces, read-only mounts and no caps.

``confine`` runs in the child between fork and exec (``preexec_fn``). In order:

1. join a pids cgroup (a fork bomb hits its ``pids.max``; root ignores ``RLIMIT_NPROC``);
2. ``unshare`` a mount and a network namespace (plus a user namespace when not root), so the
   child sees only a loopback interface that is down: no socket reaches anything;
3. make every mount read-only in the child's view except the writable paths (the workspace,
   its scratch directory) and ``/dev/shm``, ``/dev/pts``;
4. drop every capability and set no-new-privileges, so the child cannot undo step 3.

``probe`` runs the same steps in a throwaway child once per process and reports what the kernel
allows; the process sandbox uses only what worked and says so in its description.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
KEEP_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
STAY_WRITABLE = ("/dev/shm", "/dev/pts")
PIDS_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")

_libc = ctypes.CDLL(None, use_errno=True)


class ConfineError(OSError):
    pass


@dataclass(frozen=True)
class Confinement:
    writable: tuple[str, ...] = ()
    no_network: bool = True
    read_only: bool = True
    drop_caps: bool = True
    pids_cgroup: str | None = None
    """cgroup directory the child joins (see :func:`make_pids_cgroup`)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise ConfineError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, flags: int) -> None:
    src = source.encode() if source else None
    _check(_libc.mount(src, target.encode(), None, ctypes.c_ulong(flags), None), f"mount {target}")


def _unshare(no_network: bool, mounts: bool) -> None:
    flags = (CLONE_NEWNET if no_network else 0) | (CLONE_NEWNS if mounts else 0)
    if not flags:
        return
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        flags |= CLONE_NEWUSER
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:  # keep our own ids inside the new user namespace
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _mount_points() -> list[tuple[str, int]]:
    """(mount point, flags to keep) for every mount, parents before children."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        point = parts[4].encode().decode("unicode_escape")
        keep = 0
        for option in parts[5].split(","):
            keep |= KEEP_FLAGS.get(option, 0)
        out.append((point, keep))
    return out


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _read_only_view(writable: tuple[str, ...]) -> None:
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for path in writable:  # a bind mount of its own stays writable when its parent goes read-only
        _mount(path, path, MS_BIND | MS_REC)
    keep_writable = (*writable, *STAY_WRITABLE)
    for point, keep in _mount_points():
        if _inside(point, keep_writable):
            continue
        try:
            _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except ConfineError as e:
            # a mount point that no longer resolves (covered by a later mount) cannot be reached
            if point == "/" or e.errno != errno.ENOENT:
                raise


def _drop_capabilities() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words, all zero
    _check(_libc.capset(header, data), "capset")


def confine(c: Confinement) -> None:
    """Apply ``c`` to the calling process (meant for a child before exec)."""
    if c.pids_cgroup:
        Path(c.pids_cgroup, "cgroup.procs").write_text(str(os.getpid()))
    _unshare(c.no_network, c.read_only)
    if c.read_only:
        _read_only_view(c.writable)
        os.chdir(os.getcwd())  # the cwd was entered before the bind mounts: enter them
    if c.drop_caps:
        _drop_capabilities()


# ---- pids cgroups (root only) ----------------------------------------------------------------


def make_pids_cgroup(name: str, max_pids: int) -> str | None:
    """A fresh cgroup limited to ``max_pids`` tasks, or None where we may not create one."""
    for root in PIDS_CGROUP_ROOTS:
        base = Path(root)
        if not (base / "cgroup.procs").exists():
            continue
        if root == "/sys/fs/cgroup" and "pids" not in _v2_controllers(base):
            continue
        path = base / name
        try:
            path.mkdir(exist_ok=True)
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            remove_cgroup(str(path))
            continue
        return str(path)
    return None


def _v2_controllers(base: Path) -> str:
    try:
        return (base / "cgroup.subtree_control").read_text()
    except OSError:
        return ""


def kill_cgroup(path: str, signal_number: int = 9, rounds: int = 50) -> None:
    """Kill every task in the cgroup until it is empty (forks racing the kill are caught next round)."""
    procs = Path(path, "cgroup.procs")
    for _ in range(rounds):
        try:
            pids = [int(p) for p in procs.read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal_number)
        os.sched_yield()


def remove_cgroup(path: str) -> None:
    kill_cgroup(path)
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # tasks still exiting
            os.sched_yield()


# ---- what the kernel allows -------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    network_namespace: bool
    read_only_mounts: bool
    drop_caps: bool
    pids_cgroup: bool


@lru_cache(maxsize=1)
def probe() -> Capabilities:
    """Try each confinement step in a throwaway child once and remember what worked."""

    def works(c: Confinement) -> bool:
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "pass"],
                preexec_fn=lambda: confine(c),
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0

    net = works(Confinement(no_network=True, read_only=False, drop_caps=False))
    mounts = works(Confinement(no_network=False, read_only=True, drop_caps=False))
    caps = works(Confinement(no_network=False, read_only=False, drop_caps=True))
    cgroup = make_pids_cgroup(f"envforge-probe-{os.getpid()}", 16)
    if cgroup is not None:
        remove_cgroup(cgroup)
    return Capabilities(net, mounts, caps, cgroup is not None)
