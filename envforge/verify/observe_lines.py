"""Where an observation is computed: the lines of a source's observe function that compute
given elements of it.

An observation difference between equal states lives in the port's ``observe`` (or what its
contract names so: ``*_observe`` in C, ``_get_obs`` in gymnasium), and no line there assigns a
canonical field. Inside that function an element is found as an indexed assignment
(``obs[4] = ...``, C and Rust) or as the item of the list the function stacks
(``jnp.stack([...])``, one item per element, in order); else the function's lines are shown.
"""

from __future__ import annotations

import re
from pathlib import Path

from envforge.verify.findings import SourceLocation
from envforge.verify.localize import source_lines

OBSERVE_NAME = r"\w*(?:observe|get_obs|observation)\w*"
_PY_DEF = re.compile(rf"^\s*def\s+{OBSERVE_NAME}\s*\(")
_C_OR_RUST_DEF = re.compile(
    rf"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:fn\s+{OBSERVE_NAME}|\w[\w\s*]*\b{OBSERVE_NAME})\s*\([^;]*$"
)
SHOWN = 6
"""Lines of a function shown when no element can be told apart."""


def braced(path: Path) -> bool:
    return path.suffix in (".c", ".h", ".rs", ".js", ".cpp", ".cc")


def function_body(lines: tuple[str, ...], start: int, braces: bool) -> list[int]:
    """0-based lines of the function whose header is at ``start`` (header excluded)."""
    if not braces:
        indent = len(lines[start]) - len(lines[start].lstrip())
        end, depth = start, 0  # a header may span lines: ``def f(\n    a,\n) -> T:``
        for end in range(start, len(lines)):
            code = lines[end].split("#")[0]
            depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
            if depth <= 0 and code.rstrip().endswith(":"):
                break
        out = []
        for j in range(end + 1, len(lines)):
            text = lines[j]
            if text.strip() and len(text) - len(text.lstrip()) <= indent:
                break
            out.append(j)
        return out
    depth, opened, out = 0, False, []
    for j in range(start, len(lines)):
        code = re.sub(r"//.*", "", lines[j])
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if j > start:
            out.append(j)
        if opened and depth <= 0:
            break
    return out


def _stacked_items(lines: tuple[str, ...], body: list[int]) -> list[list[int]]:
    """The items of the first list in ``body`` written one (or more) lines per item: each item's
    0-based lines."""
    for k, j in enumerate(body):
        if not re.search(r"[\[(]\s*$", lines[j].split("#")[0]):
            continue
        items: list[list[int]] = []
        depth, ended = 1, True
        for m in body[k + 1 :]:
            code = lines[m].split("#")[0]
            if depth == 1 and re.match(r"\s*[\])]", code):
                break
            if code.strip():
                if ended and depth == 1:
                    items.append([m])
                elif items:
                    items[-1].append(m)
            depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
            if depth <= 0:
                break
            ended = depth == 1 and code.rstrip().endswith(",")
        if len(items) > 1:
            return items
    return []


def observe_lines(files: list[Path], elements: list[int]) -> list[SourceLocation]:
    """The lines of each file's observe function that compute ``elements`` (flat indices),
    in element order; the function's first lines where elements cannot be told apart."""
    out: list[SourceLocation] = []
    for path in files:
        if not path.is_file():
            continue
        lines = source_lines(str(path), path.stat().st_mtime)
        is_braced = braced(path)
        header = _C_OR_RUST_DEF if is_braced else _PY_DEF
        for start, text in enumerate(lines):
            if not header.match(text) or text.rstrip().endswith(";"):
                continue
            body = function_body(lines, start, is_braced)
            picked = _element_lines(lines, body, elements)
            for j in picked:
                loc = SourceLocation(file=str(path), line=j + 1, text=lines[j].strip())
                if loc not in out:
                    out.append(loc)
    return out


def _element_lines(lines: tuple[str, ...], body: list[int], elements: list[int]) -> list[int]:
    indexed = []
    for e in elements:
        pattern = re.compile(rf"\w\s*\[\s*(?:\w+\s*\*\s*\w+\s*\+\s*)?{e}\s*\]\s*=(?!=)")
        indexed += [j for j in body if pattern.search(lines[j]) and j not in indexed]
    if indexed:
        return indexed
    items = _stacked_items(lines, body)
    if items and all(e < len(items) for e in elements):
        return [j for e in elements for j in items[e]]
    code = [j for j in body if lines[j].strip() and not lines[j].strip().startswith(("#", "//"))]
    return code[:SHOWN]
