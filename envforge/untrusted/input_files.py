"""Reading the files a user (or a port) hands envforge: specs, manifests, model scripts,
cassettes, price tables, a port's Cargo.toml, a workspace's config.

Each is opened once, without blocking (a FIFO would otherwise hang the command for good), and
read only when it is a regular file of at most a stated size (``/dev/zero`` would otherwise be
read until memory runs out). TOML is parsed only when its arrays and inline tables nest at most
:data:`TOML_DEPTH` deep: ``tomllib`` parses nesting by recursion, and a few hundred brackets end
in a RecursionError thousands of lines long. Every refusal is :class:`BadInput` (one line,
exit code 2) naming the file; a TOML nesting refusal is a ``TOMLDecodeError`` too, so a caller
that turns bad TOML into something else (a finding about a port's Cargo.toml) does the same
with it.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from envforge.errors import BadInput
from envforge.untrusted.regular import NotPlainFile, opened, read_fd

TOML_DEPTH = 64
"""Most arrays and inline tables one inside another (real files use two or three)."""
TOML_BYTES = 4 * 2**20
"""Largest TOML file read: a spec, a manifest, a Cargo.toml are kilobytes."""
SCRIPT_BYTES = 64 * 2**20
"""Largest model script or cassette read (they hold whole ports, many times over)."""

_TOKENS = re.compile(
    r"""#[^\n]*|\"\"\"(?:\\.|[^\\])*?\"\"\"|'''.*?'''|"(?:\\.|[^"\\\n])*"|'[^'\n]*'|[\[\]{}]""",
    re.DOTALL,
)


class InputFileError(BadInput):
    """A file that may not be read: missing, not a regular file, a link, too large, not text."""

    def __init__(self, path: Path, what: str, reason: str) -> None:
        self.path = path
        self.what = what
        self.reason = reason
        super().__init__(f"{what} {path}: {reason}")


class TomlTooDeep(tomllib.TOMLDecodeError):
    """Arrays or inline tables nested deeper than :data:`TOML_DEPTH`."""

    def __init__(self, depth: int) -> None:
        ValueError.__init__(
            self,
            f"arrays or inline tables nested more than {TOML_DEPTH} deep"
            + (f" ({depth} levels)" if depth else ""),
        )


def _reason(why: str) -> str:
    """The one rule's refusal, as this module has always said it."""
    if why.startswith("a symbolic link"):
        return "a symbolic link (refused: it is not followed)"
    if why in ("a folder", "a FIFO", "a socket", "a device") or why.startswith("not a regular"):
        return why if why.startswith("not a regular") else f"not a regular file ({why})"
    if why == "not found" or why.startswith("over the"):
        return why
    return f"cannot be opened ({why})"


def read_bytes(path: Path, what: str, limit: int, follow_links: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; else InputFileError.
    Read by the one rule (``untrusted/regular.py``); with ``follow_links`` (a path the user
    typed) links are resolved first, without it a symbolic link is refused too."""
    target = Path(os.path.realpath(path)) if follow_links else Path(path)
    try:
        with opened(target, one_link=False) as fd:
            size = os.fstat(fd).st_size
            if size > limit:
                raise InputFileError(path, what, f"{size} bytes, over the {limit} allowed")
            return read_fd(fd, limit, path)
    except NotPlainFile as e:
        raise InputFileError(path, what, _reason(e.why)) from None
    except OSError as e:
        raise InputFileError(path, what, f"cannot be read ({e.strerror or e})") from None


def read_text(path: Path, what: str, limit: int, follow_links: bool = True) -> str:
    """:func:`read_bytes` as UTF-8 text; text that is not UTF-8 is InputFileError."""
    data = read_bytes(path, what, limit, follow_links)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(path, what, f"not UTF-8 text (byte {e.start})") from None


def toml_depth(text: str) -> int:
    """How deep arrays and inline tables nest in ``text`` (brackets in strings and comments do
    not count; a table header ``[[a]]`` counts 2, which no limit here comes near)."""
    depth = deepest = 0
    for token in _TOKENS.finditer(text):
        mark = token.group()
        if mark in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif mark in ("]", "}"):
            depth = max(0, depth - 1)
    return deepest


def parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` with nesting bounded: TomlTooDeep (a TOMLDecodeError) past the limit."""
    depth = toml_depth(text)
    if depth > TOML_DEPTH:
        raise TomlTooDeep(depth)
    try:
        return tomllib.loads(text)
    except RecursionError:  # the count above missed some nesting: still one line
        raise TomlTooDeep(0) from None


def load_toml(
    path: Path, what: str, limit: int = TOML_BYTES, follow_links: bool = True
) -> dict[str, Any]:
    """A TOML file read with :func:`read_text` and parsed with :func:`parse_toml`. Reading
    problems are InputFileError; bad TOML (too deep included) is a TOMLDecodeError."""
    return parse_toml(read_text(path, what, limit, follow_links))
