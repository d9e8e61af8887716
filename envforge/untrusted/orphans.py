"""Worker processes that end with the process that started them.

A spawned worker (a batch pool's verifier, a benchmark job) keeps running when its parent is
killed from outside (``kill -9``, a shell's timeout), holding cores and memory for a result
nobody will read. ``exit_with_parent`` starts a daemon thread in the worker that exits it once
its parent is gone (the worker is re-parented, so ``getppid`` changes).
"""

from __future__ import annotations

import os
import threading
import time

POLL_S = 1.0
"""How often the watcher looks at its parent."""


def exit_with_parent(parent: int | None = None) -> None:
    """Exit this process (code 1, no cleanup) once ``parent`` (default: the current parent)
    is no longer its parent."""
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="envforge-parent-watch").start()
