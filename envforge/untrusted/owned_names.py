"""Names of what a run leaves on the host, tagged with the process that owns them.

``<pid namespace>.<pid>.<start time>`` of the owning process (the start time tells a dead owner
from a new process that got the same pid) goes into every scratch folder, log, cgroup and
container name, so a later run can tell what belongs to an owner that is gone. The drivers
name their scratch files with it; ``sandbox/leftovers.py`` sweeps by it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

OWNED = re.compile(r"^envforge-(\d+)\.(\d+)\.(\d+)-")
"""A leftover's name: ``envforge-<pid namespace>.<pid>.<start time>-...``."""


def _pid_namespace() -> str:
    return str(os.stat("/proc/self/ns/pid").st_ino)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of its stat), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


@lru_cache(maxsize=8)
def _tag_of(pid: int) -> str:
    return f"{_pid_namespace()}.{pid}.{_start_time(pid) or 0}"


def owner_tag() -> str:
    """This process's tag (a forked child computes its own)."""
    return _tag_of(os.getpid())


def owned_prefix(what: str) -> str:
    """A temporary name's prefix that says who owns it: ``envforge-<tag>-<what>-``."""
    return f"envforge-{owner_tag()}-{what}-"


def owner_gone(name: str) -> bool:
    """True when ``name`` is a leftover of a process of this pid namespace that has ended."""
    match = OWNED.match(name)
    if match is None:
        return False
    namespace, pid, start = match.groups()
    if namespace != _pid_namespace():
        return False
    return _start_time(int(pid)) != start
