"""The installed library modules a reference runs (env.toml ``library_modules``), found as files
of the reference's environment without importing anything: what the translation prompt shows
and where findings look for the reference's lines (the library's own code, not only the
adapter around it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from envforge.spec import EnvSpec


def environment_paths() -> list[Path]:
    """Where the reference's interpreter finds installed modules: its import path without the
    folder envforge was started from (``python -m`` puts it first), which is nobody's
    environment: a ``hostsecret.py`` there must not become library code."""
    entries = sys.path if sys.flags.safe_path else sys.path[1:]
    here = Path.cwd().resolve()
    out = []
    for entry in entries:
        if (
            entry
            and os.path.isabs(entry)
            and os.path.isdir(entry)
            and Path(entry).resolve() != here
        ):
            out.append(Path(entry))
    return out


def find_library_module(module: str, paths: list[Path]) -> tuple[Path, Path] | None:
    """(the search path entry, the module's ``.py`` file) for a dotted name, found by looking
    at files only (nothing is imported, so no package's import-time code runs); None when no
    entry holds it as source. A file or package that is a link leading out of its entry is
    not the module (it is some other file)."""
    parts = module.split(".")
    for entry in paths:
        base = entry.resolve()
        folder = entry.joinpath(*parts[:-1])
        for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
            if not candidate.is_file():
                continue
            real = candidate.resolve()
            if real.is_relative_to(base) and real.suffix == ".py":
                return entry, real
    return None


def library_files(spec: EnvSpec) -> list[Path]:
    """The ``.py`` files of the spec's library modules that are installed (others left out:
    a missing one is the prompt's bad input, never a reason for a verify to fail)."""
    paths = environment_paths()
    found = [find_library_module(name, paths) for name in spec.library_modules]
    return [origin for hit in found if hit is not None for origin in [hit[1]]]
