"""Where envforge keeps what it builds and computes between runs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$ENVFORGE_CACHE``, else ``$XDG_CACHE_HOME/envforge`` (``~/.cache/envforge``); not
    created here."""
    root = os.environ.get("ENVFORGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "envforge"
    )
    return Path(root)
