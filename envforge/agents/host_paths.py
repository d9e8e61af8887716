"""Where this machine keeps things is not the model's business: hide it in what the model reads.

Tool output (a traceback through the virtualenv's JAX, ``env`` printing PATH, a compiler error
naming the project folder) would otherwise show the host's layout, and a cassette recorded on
one machine would not replay on another. The workspace becomes relative paths; the Python
installation, the project and the home folder become short placeholders.
"""

from __future__ import annotations

import contextlib
import re
import sys
from functools import cache
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
"""The folder holding the envforge package (the checkout, or site-packages when installed)."""


@cache
def _host_names() -> tuple[tuple[str, str], ...]:
    names = [
        (sys.prefix, "<python-env>"),
        (sys.exec_prefix, "<python-env>"),
        (sys.base_prefix, "<python>"),
        (sys.base_exec_prefix, "<python>"),
        (str(PROJECT), "<envforge>"),
        (str(Path.home()), "~"),
    ]
    return tuple(names)


SHARED_PREFIXES = {"/usr", "/usr/local", "/opt/homebrew", "/opt/local"}
"""A system Python's prefix says nothing about this machine, and hiding it would garble every
compiler and library path in the output (``/usr/include`` is not the Python installation)."""


def _variants(path: str) -> set[str]:
    found = {path.rstrip("/")}
    with contextlib.suppress(OSError):
        found.add(str(Path(path).resolve()))
    return {p for p in found if len(p) > 1 and p not in SHARED_PREFIXES}


def hide_host_paths(text: str, workspaces: list[Path]) -> str:
    """``text`` with workspace paths made relative and host paths replaced by placeholders."""
    names: list[tuple[str, str]] = [(w, ".") for root in workspaces for w in _variants(str(root))]
    names += [(p, name) for path, name in _host_names() for p in _variants(path)]
    # longest first: the workspace and the virtualenv usually sit inside the project or home
    for path, name in sorted(names, key=lambda pair: -len(pair[0])):
        if path not in text:
            continue
        prefix = "" if name == "." else name + "/"
        text = text.replace(path + "/", prefix)
        text = re.sub(re.escape(path) + r"(?![\w.-])", name, text)
    return text
