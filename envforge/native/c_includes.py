"""The headers a C source includes by quoted name (``#include "physics.h"``), found beside it:
part of its source, so a finding can name a line in them."""

from __future__ import annotations

import re
from pathlib import Path

_QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
MAX_FILES = 64


def quoted_includes(source: Path) -> list[Path]:
    """Every header ``source`` includes by a quoted name, transitively, resolved against the
    including file's folder; only regular files that exist, each once, in include order."""
    found: list[Path] = []
    pending = [source]
    while pending and len(found) < MAX_FILES:
        current = pending.pop(0)
        try:
            text = current.read_text(errors="replace")
        except OSError:
            continue
        for name in _QUOTED.findall(text):
            path = current.parent / name
            if path.is_file() and not path.is_symlink() and path != source and path not in found:
                found.append(path)
                pending.append(path)
    return found
