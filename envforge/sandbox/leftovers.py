"""Everything a verification leaves on the host is named after its owner, so it can be removed.

A verifier normally removes its own scratch folders, driver logs, pids cgroups and containers
when a driver closes. One killed with ``kill -9`` (or by the OOM killer) cannot, so each of these
carries an owner tag (``envforge/untrusted/owned_names.py``): ``<pid namespace>.<pid>.<start time>`` of
the process that made it (the start time tells a dead owner from a new process that got the
same pid). The next envforge run that opens a sandbox sweeps what belongs to owners that are
gone (:func:`sweep_once`):

* ``$TMPDIR/envforge-<tag>-*`` scratch folders and ``.log`` files;
* ``envforge-<tag>-<n>`` pids and memory cgroups (their tasks killed first);
* containers labelled with the tag (``envforge/sandbox/docker.py``: ``sweep_containers``).

What another pid namespace owns is never touched: its pids mean nothing here. A SIGTERM is
turned into ``SystemExit`` (:func:`unwind_on_sigterm`), so a terminated verifier runs its
``finally`` blocks and removes its own leftovers at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from envforge.sandbox.cgroups import MEMORY_CGROUP_ROOTS, PIDS_CGROUP_ROOTS, remove_cgroup
from envforge.untrusted.owned_names import owner_gone


def remove_tree(path: Path) -> None:
    """Remove a file or folder without following links, also folders the sandbox made
    unwritable (as a non-root user, ``chmod 0`` on a folder would stop ``rmtree``)."""

    def retry(function: object, name: str, _: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, 0o700)
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path, onerror=retry)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def sweep(temp_dir: Path | None = None) -> list[str]:
    """Remove the scratch folders, logs and cgroups of owners that are gone; returns them."""
    removed = []
    folder = Path(temp_dir or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if owner_gone(entry.name):
                remove_tree(Path(entry.path))
                removed.append(entry.path)
    for root in dict.fromkeys((*PIDS_CGROUP_ROOTS, *MEMORY_CGROUP_ROOTS)):
        with contextlib.suppress(OSError):
            for entry in os.scandir(root):
                if entry.is_dir(follow_symlinks=False) and owner_gone(entry.name):
                    remove_cgroup(entry.path)
                    removed.append(entry.path)
    return removed


@lru_cache(maxsize=1)
def sweep_once() -> list[str]:
    """:func:`sweep`, once per process (called whenever a sandbox is opened)."""
    return sweep()


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def unwind_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit, so ``finally`` blocks remove containers and folders.

    Only where nobody chose a handler yet, and only from the main thread (Python's rule)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
