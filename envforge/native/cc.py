"""The C compiler envforge builds with: the references, the bench harness, mutant checks, the
native digest."""

from __future__ import annotations

import os
import shutil


def c_compiler() -> str | None:
    """``$CC``, else ``cc``, else ``gcc`` on the PATH; None when there is none."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
