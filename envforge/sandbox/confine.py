"""Confinement of a process-sandbox child with Linux namespaces, read-only mounts and no caps.

``confine`` runs in the child between fork and exec (``preexec_fn``). In order:

1. join a pids cgroup (a fork bomb hits its ``pids.max``; root ignores ``RLIMIT_NPROC``) and a
   memory cgroup (envforge/sandbox/cgroups.py), and offer itself first to the OOM killer;
2. ``unshare`` a mount, a network and a pid namespace (plus a user namespace when not root), so
   the child sees only a loopback interface that is down: no socket reaches anything;
3. with a ``view_root``, pivot into a new root that holds only the paths the code needs, a
   private ``/tmp`` and ``/dev/shm`` (envforge/sandbox/view.py); then make every mount read-only in the child's view except the writable paths (the workspace,
   its scratch directory) and ``/dev/shm``, ``/dev/pts``; put an empty read-only tmpfs over
   ``/run`` (``/var/run``) and ``/dev/null`` over every other Unix socket bound on the host:
   a read-only mount does not stop a ``connect`` (``/var/run/docker.sock`` is root on the host);
4. fork: the child becomes pid 1 of the new pid namespace (it cannot see or signal the
   verifier, and when it dies the kernel kills everything left in the namespace) and mounts a
   fresh ``/proc`` of it; the parent stays outside, relays its exit status, and kills it if the
   verifier dies first (nobody would stop it any more);
5. drop every capability and set no-new-privileges, so the child cannot undo step 3.

``probe`` runs the same steps in a throwaway child once per process and reports what the kernel
allows; the process sandbox uses only what worked and says so in its description.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from envforge.sandbox.cgroups import (  # noqa: F401 - re-exported: cgroups lived here before
    PIDS_CGROUP_ROOTS,
    kill_cgroup,
    make_pids_cgroup,
    remove_cgroup,
)
from envforge.sandbox.view import enter_view

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
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
RUN_DIRECTORIES = ("/run", "/var/run")
"""Daemons' sockets live here (docker's among them): the child gets an empty one instead."""

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
    own_pids: bool = True
    """A pid namespace of its own (and, with ``read_only``, a fresh ``/proc``)."""
    hidden_sockets: tuple[str, ...] = ()
    """Unix sockets bound on the host (:func:`host_sockets`), covered with ``/dev/null``."""
    memory_cgroup: str | None = None
    """A second cgroup to join (cgroup v1's memory hierarchy), see envforge/sandbox/cgroups.py."""
    view_root: str | None = None
    """An empty host directory: with ``read_only``, the child's new root is built there
    (envforge/sandbox/view.py) and holds only ``visible`` and ``writable``."""
    visible: tuple[str, ...] = ()
    tmp_mb: int = 256
    shm_mb: int = 256


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise ConfineError(err, f"{what}: {os.strerror(err)}")


def _mount(
    source: str | None, target: str, flags: int, fstype: str | None = None, data: str = ""
) -> None:
    src = source.encode() if source else None
    kind = fstype.encode() if fstype else None
    options = data.encode() if data else None
    result = _libc.mount(src, target.encode(), kind, ctypes.c_ulong(flags), options)
    _check(result, f"mount {target}")


def _unshare(no_network: bool, mounts: bool, pids: bool) -> None:
    flags = (CLONE_NEWNET if no_network else 0) | (CLONE_NEWNS if mounts else 0)
    flags |= CLONE_NEWPID if pids else 0
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


def _read_only_view(writable: tuple[str, ...], private_tmp: bool = False) -> None:
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for path in writable:  # a bind mount of its own stays writable when its parent goes read-only
        _mount(path, path, MS_BIND | MS_REC)
    keep_writable = (*writable, *STAY_WRITABLE)
    own_tmp = "/tmp" if private_tmp else None  # the view's own tmpfs; not what is bound inside it
    for point, keep in _mount_points():
        if point == own_tmp or _inside(point, keep_writable):
            continue
        try:
            _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except ConfineError as e:
            # a mount point that no longer resolves (covered by a later mount) cannot be reached
            if point == "/" or e.errno != errno.ENOENT:
                raise


def host_sockets() -> tuple[str, ...]:
    """Paths of the Unix sockets bound in this network namespace (read before unsharing it)."""
    found = set()
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return ()
    for line in lines:
        parts = line.split(None, 7)
        if len(parts) == 8 and parts[7].startswith("/"):  # "@...": abstract, per namespace
            found.add(os.path.realpath(parts[7]))
    return tuple(sorted(found))


def _hide_host_sockets(writable: tuple[str, ...], sockets: tuple[str, ...]) -> None:
    run = {os.path.realpath(p) for p in RUN_DIRECTORIES if os.path.isdir(p)}
    private = tuple(d for d in sorted(run) if not any(_inside(w, (d,)) for w in writable))
    for directory in private:
        _mount("tmpfs", directory, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "tmpfs", "size=4k")
    for path in sockets:
        if _inside(path, (*writable, *private)):
            continue
        try:
            _mount("/dev/null", path, MS_BIND)
        except ConfineError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR):  # gone since it was listed
                raise


def _enter_pid_namespace(verifier: int, fresh_proc: bool) -> None:
    """Fork twice; only the command returns, as pid 2 of the new pid namespace.

    Outside the namespace a watcher waits and ends like the command did (the sandbox sees its
    exit code or signal); if the verifier dies first it kills the namespace's init, and the
    kernel then kills everything in the namespace, so a killed verifier leaves no sandboxed
    process running. Inside, pid 1 reaps orphans and reports the command's status to the
    watcher (a pid 1 cannot die of a signal it sends itself, so it cannot simply pass it on).
    The command is not pid 1 because pid 1 ignores its own signals (``abort``, ``kill``)."""
    report, reported = os.pipe()
    init = _fork()
    if init:
        os.close(reported)
        _close_all_but(report)
        status = _wait_unless_orphaned(init, verifier)
        with contextlib.suppress(OSError, ValueError):
            status = int(os.read(report, 32) or status)
        _end_like(status)
    os.close(report)
    if fresh_proc:
        _mount_fresh_proc()
    command = _fork()
    if command == 0:
        os.close(reported)
        return
    try:
        _close_all_but(reported)
        while True:
            pid, status = os.wait()  # pid 1 inherits orphans: reap them as they come
            if pid == command:
                os.write(reported, str(status).encode())
                os._exit(0)
    finally:
        os._exit(255)


def _fork() -> int:
    child: int = _libc.fork()  # not os.fork: its at-fork hooks (JAX warns there) are not ours
    if child < 0:
        _check(child, "fork")
    return child


def _close_all_but(keep: int) -> None:
    """Close inherited descriptors (subprocess's error pipe: the parent reads it until EOF)."""
    os.closerange(3, keep)
    os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _end_like(status: int) -> None:
    """Exit as a process with this wait status did: same exit code, or the same signal."""
    try:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status))
    finally:
        os._exit(255)


def _wait_unless_orphaned(child: int, verifier: int) -> int:
    try:  # wake on either process's end; without pidfds poll a few times a second
        watched = [os.pidfd_open(verifier), os.pidfd_open(child)]
    except (OSError, AttributeError):
        watched = []
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return status
        if os.getppid() != verifier:
            os.kill(child, signal.SIGKILL)
            return os.waitpid(child, 0)[1]
        if watched:
            select.select(watched, [], [], 5.0)
        else:
            time.sleep(0.2)


def _mount_fresh_proc() -> None:
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY
    _mount("proc", "/proc", flags, "proc")


def _offer_to_oom_killer() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")


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
    for cgroup in dict.fromkeys(g for g in (c.pids_cgroup, c.memory_cgroup) if g):
        Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    _offer_to_oom_killer()
    verifier = os.getppid()
    _unshare(c.no_network, c.read_only, c.own_pids)
    if c.read_only and c.view_root:
        _mount(None, "/", MS_REC | MS_PRIVATE)
        enter_view(c.view_root, c.visible, c.writable, c.tmp_mb, c.shm_mb)
    if c.read_only:
        _read_only_view(c.writable, private_tmp=c.view_root is not None)
        _hide_host_sockets(c.writable, c.hidden_sockets)
        os.chdir(os.getcwd())  # the cwd was entered before the bind mounts: enter them
    if c.own_pids:
        _enter_pid_namespace(verifier, fresh_proc=c.read_only)
    if c.drop_caps:
        _drop_capabilities()


# ---- what the kernel allows -------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    network_namespace: bool
    read_only_mounts: bool
    drop_caps: bool
    pids_cgroup: bool
    pid_namespace: bool = False


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

    only = Confinement(no_network=False, read_only=False, drop_caps=False, own_pids=False)
    net = works(replace(only, no_network=True))
    mounts = works(replace(only, read_only=True, hidden_sockets=host_sockets()))
    caps = works(replace(only, drop_caps=True))
    pids = works(replace(only, own_pids=True, read_only=mounts))
    from envforge.untrusted.owned_names import owned_prefix

    cgroup = make_pids_cgroup(f"{owned_prefix('probe')}0", 16)
    if cgroup is not None:
        remove_cgroup(cgroup)
    return Capabilities(net, mounts, caps, cgroup is not None, pids)
