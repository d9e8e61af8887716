"""cgroups of a process-sandbox child: a task limit and a memory limit (root, or delegated).

A fork bomb stops at ``pids.max`` (root ignores ``RLIMIT_NPROC``). Memory is limited by what the
child really uses (``memory.max`` in cgroup v2, ``memory.limit_in_bytes`` in v1, swap included
where the kernel counts it), not by address space: JAX reserves far more address space than it
touches, so an address-space rlimit low enough to matter would break it. In cgroup v1 the two
limits are two cgroups in two hierarchies; in v2 one cgroup carries both (a process belongs to
exactly one v2 cgroup). Each is named after its owner (envforge/untrusted/owned_names.py), so the sweep
in envforge/sandbox/leftovers.py removes those of a verifier that was killed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PIDS_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
MEMORY_CGROUP_ROOTS = ("/sys/fs/cgroup/memory", "/sys/fs/cgroup")
V2_ROOT = "/sys/fs/cgroup"
MB = 1024 * 1024


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
            if pid <= 0:  # a task outside our pid namespace reads as 0: kill(0) is our own group
                continue
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


def make_memory_cgroup(name: str, memory_mb: int, pids_cgroup: str | None) -> str | None:
    """A cgroup whose tasks may use ``memory_mb`` of real memory (swap included), or None where
    we may not make one. In cgroup v2 the pids cgroup, when there is one, gets the limit too
    (and is returned): the child can join only one."""
    limit = str(memory_mb * MB)
    v1 = Path(MEMORY_CGROUP_ROOTS[0])
    if (v1 / "cgroup.procs").exists():
        path = v1 / name
        try:
            path.mkdir(exist_ok=True)
            (path / "memory.limit_in_bytes").write_text(limit)
        except OSError:
            remove_cgroup(str(path))
            return None
        with contextlib.suppress(OSError):  # only where the kernel accounts swap
            (path / "memory.memsw.limit_in_bytes").write_text(limit)
        return str(path)
    base = Path(V2_ROOT)
    if not (base / "cgroup.procs").exists() or "memory" not in _v2_controllers(base):
        return None
    shared = pids_cgroup is not None and Path(pids_cgroup).parent == base
    path = Path(pids_cgroup) if shared and pids_cgroup else base / name
    try:
        path.mkdir(exist_ok=True)
        (path / "memory.max").write_text(limit)
    except OSError:
        if not shared:
            remove_cgroup(str(path))
        return None
    with contextlib.suppress(OSError):
        (path / "memory.swap.max").write_text("0")
    return str(path)


def oom_kills(path: str) -> int:
    """How many tasks the OOM killer ended in this memory cgroup (0 when unknown)."""
    for name in ("memory.events", "memory.oom_control"):
        with contextlib.suppress(OSError, ValueError):
            for line in Path(path, name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0
