"""Source localization: which lines in the reference and in the port assign a diverging field."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from envforge.spec import EnvSpec
from envforge.verify.findings import SourceLocation

# Non-state keys of a transition and the names sources commonly give them.
TRANSITION_NAMES: dict[str, tuple[str, ...]] = {
    "reward": ("reward", "rewards", "rew"),
    "terminated": ("terminated", "terminal", "terminals", "done", "dones"),
    "truncated": ("truncated", "truncation", "truncations"),
    "obs": ("obs", "observation", "observations"),
}
_ASSIGN_OPS = r"(?:[+\-*/%&|^]|<<|>>|//|\*\*)?=(?!=)"


def names_for(spec: EnvSpec, key: str) -> tuple[str, ...]:
    if key in TRANSITION_NAMES:
        return TRANSITION_NAMES[key]
    try:
        f = spec.field(key)
    except KeyError:
        return (key,)
    names = [f.name, *f.aliases]
    if f.c_field:
        names.append(f.c_field)
    return tuple(dict.fromkeys(names))


@lru_cache(maxsize=64)
def _lines(path: str, mtime: float) -> tuple[str, ...]:
    try:
        return tuple(Path(path).read_text(errors="replace").splitlines())
    except OSError:
        return ()


def _patterns(name: str, c_like: bool) -> list[re.Pattern[str]]:
    n = re.escape(name)
    pats = [
        rf"(?<![\w.]){n}\s*(?:\[[^\]]*\])?\s*{_ASSIGN_OPS}",  # name = / name[i] +=
        rf"(?:->|\.){n}\s*(?:\[[^\]]*\])?\s*{_ASSIGN_OPS}",  # env->name = / self.name =
        rf"(?<![\w.]){n}\s*,.*=(?!=)|,\s*{n}\s*(?:,[^=]*)?=(?!=)",  # tuple unpacking
    ]
    if c_like:
        pats.append(rf"(?:\+\+|--)\s*(?:\w+->)?{n}\b|\b{n}\s*(?:\+\+|--)")
    else:
        pats.append(rf"\b{n}\s*=\s*[^=]")  # keyword argument: replace(name=...)
        pats.append(rf"\.{n}\.at\[")  # functional array update
    return [re.compile(p) for p in pats]


def assignments(path: Path, names: tuple[str, ...], limit: int = 8) -> list[SourceLocation]:
    """Lines of ``path`` that assign any of ``names`` (comments skipped)."""
    if not path.is_file():
        return []
    c_like = path.suffix in (".c", ".h", ".rs", ".js", ".cpp")
    lines = _lines(str(path), path.stat().st_mtime)
    patterns = [p for name in names for p in _patterns(name, c_like)]
    found: list[SourceLocation] = []
    for number, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith(("#", "//", "*", "/*", '"""')):
            continue
        code = stripped.split("//")[0] if c_like else stripped.split("#")[0]
        if any(p.search(code) for p in patterns):
            found.append(SourceLocation(file=str(path), line=number, text=stripped))
            if len(found) >= limit:
                break
    return found


def locate(
    spec: EnvSpec, keys: list[str], files: list[Path], limit: int = 8
) -> list[SourceLocation]:
    """All assignments of the given canonical fields / transition keys across ``files``."""
    out: list[SourceLocation] = []
    for key in keys:
        for path in files:
            for loc in assignments(path, names_for(spec, key), limit):
                if loc not in out:
                    out.append(loc)
    return out[: limit * max(1, len(keys))]
