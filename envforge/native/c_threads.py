"""May a C reference's ``reset`` run on two threads at once? Asked of its built library.

The seed sweep resets billions of seeds in the reference (``envforge_reset_digest``); on a
cold digest cache the reference is the sweep's slow side (pong: 24 M seeds/s on one core, the
JAX port 196 M/s), so its chunks are split across threads when that cannot change a result.
The shim keeps its struct on the stack; what could be shared is the reference's own: writable
static or global data (a counter, a function-level ``static``) or a libc call with hidden state
(``rand``, ``strtok``). ``nm`` lists both. Without ``nm``, or with either found, one thread.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

WRITABLE_TYPES = set("bBdDgGsS")
"""``nm`` symbol types of writable data (bss, data, small data)."""

TOOLCHAIN_DATA = {
    "_DYNAMIC",
    "_GLOBAL_OFFSET_TABLE_",
    "__TMC_END__",
    "__dso_handle",
    "completed.0",
    "__do_global_dtors_aux_fini_array_entry",
    "__frame_dummy_init_array_entry",
    "__bss_start",
    "_edata",
    "_end",
}
"""Writable symbols every shared library gets from gcc's start files, not from the reference."""

HIDDEN_STATE_CALLS = {
    "rand",
    "srand",
    "random",
    "srandom",
    "drand48",
    "lrand48",
    "mrand48",
    "srand48",
    "seed48",
    "lcong48",
    "initstate",
    "setstate",
    "strtok",
    "localtime",
    "gmtime",
    "asctime",
    "ctime",
}
"""libc functions that keep state between calls in the process."""


@cache
def shared_state(lib: Path) -> str | None:
    """What in ``lib`` a second thread could share (one line), or None if nothing; a library
    ``nm`` cannot read counts as shared."""
    nm = shutil.which("nm")
    if nm is None:
        return "no nm to inspect the library"
    try:
        out = subprocess.run([nm, str(lib)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"nm failed: {e}"
    if out.returncode != 0:
        return f"nm failed: {out.stderr.strip()[:200]}"
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, name = parts[-2], parts[-1]
        if kind in WRITABLE_TYPES and name not in TOOLCHAIN_DATA:
            return f"writable data {name}"
        if kind == "U" and name.split("@")[0] in HIDDEN_STATE_CALLS:
            return f"calls {name.split('@')[0]}"
    return None


def sweep_threads(lib: Path) -> int:
    """Threads for the reference's digest chunks: 2 on a machine with 2+ cores and a library
    with nothing to share, else 1."""
    if (os.cpu_count() or 1) < 2 or shared_state(lib) is not None:
        return 1
    return 2
