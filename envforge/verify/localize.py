"""Source localization: which lines in the reference and in the port assign a diverging field.

A finding lists the lines that assign the diverging field, then the definitions those lines
read, followed a few hops back in the same file: local variables, constants (``NAME = ...``,
``#define NAME``) and the ``return`` lines of functions defined there. A wrong constant or a
bug inside a helper is then named even though the line assigning the field looks right.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from envforge.spec import EnvSpec
from envforge.untrusted.port_files import MAX_READ_BYTES, read_regular
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
    if f.attr and spec.reference_kind == "node":  # "sides[*].team[*].sleepTurns": sleepTurns
        names.append(re.sub(r"\[[^\]]*\]", "", f.attr).rsplit(".", 1)[-1])
    return tuple(dict.fromkeys(names))


@lru_cache(maxsize=64)
def source_lines(path: str, mtime: float) -> tuple[str, ...]:
    """The lines of a regular file, opened without following a link at its last component and
    without blocking, at most ``MAX_READ_BYTES`` of it; () for anything else. A port's files
    reach here only from the host's own listing (``envforge/untrusted/port_files.py``); a reference's
    paths are resolved first."""
    data = read_regular(path, MAX_READ_BYTES)
    return tuple(data.decode(errors="replace").splitlines()) if data is not None else ()


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


def _is_comment(stripped: str) -> bool:
    """A comment line (``*reward = x`` in C is code, ``* text`` inside a block comment is not)."""
    return stripped.startswith(("#", "//", "/*", '"""', "* ", "*/")) or stripped == "*"


def assignments(path: Path, names: tuple[str, ...], limit: int = 8) -> list[SourceLocation]:
    """Lines of ``path`` that assign any of ``names`` (comments skipped)."""
    if not path.is_file():
        return []
    c_like = path.suffix in (".c", ".h", ".rs", ".js", ".cpp")
    lines = source_lines(str(path), path.stat().st_mtime)
    patterns = [p for name in names for p in _patterns(name, c_like)]
    found: list[SourceLocation] = []
    for number, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped or _is_comment(stripped):
            continue
        code = stripped.split("//")[0] if c_like else stripped.split("#")[0]
        if any(p.search(code) for p in patterns):
            found.append(SourceLocation(file=str(path), line=number, text=stripped))
            if len(found) >= limit:
                break
    return found


def locate(
    spec: EnvSpec,
    keys: list[str],
    files: list[Path],
    limit: int = 8,
    depth: int = 4,
    phase: str | None = None,
) -> list[SourceLocation]:
    """Assignments of the given canonical fields / transition keys across ``files`` (in code
    the ``phase``, reset or step, runs: ``phases.py``), then the definitions they read, nearest
    first (``depth`` hops back). Among equally near ones, those more of the diverging keys
    read come first: a common cause."""
    from envforge.verify.phases import in_phase

    out: list[SourceLocation] = []
    own: dict[str, list[SourceLocation]] = {}
    for key in keys:
        found = [loc for path in files for loc in assignments(path, names_for(spec, key), limit)]
        own[key] = in_phase(found, files, phase)
        out.extend(loc for loc in own[key] if loc not in out)
    direct = out[: limit * max(1, len(keys))]
    known = {name for key in keys for name in names_for(spec, key)}
    reached: dict[tuple[str, int], tuple[SourceLocation, int, int]] = {}  # loc, hop, keys
    for key in keys:
        nearest = dependency_hops([d for d in own[key] if d in direct], known, depth, files)
        for loc, hop in nearest:
            _, best, count = reached.get((loc.file, loc.line), (loc, hop, 0))
            reached[(loc.file, loc.line)] = (loc, min(hop, best), count + 1)
    ranked = sorted(reached.values(), key=lambda r: (r[1], -r[2]))
    return direct + [loc for loc, _, _ in ranked if loc not in direct]


# ---- dependencies: what the assigning lines read ------------------------------------------

# a name that is read: not an attribute (x.name, p->name), not an object base (name.x, name->x),
# not a keyword argument (f(name=...))
_IDENT = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)(?!\w)(?!\s*(?:\.(?!\d)|->|=(?!=)))")
_ASSIGN = re.compile(r"(?<![<>!=])(?:[+\-*/%&|^]|<<|>>|//|\*\*)?=(?!=)")
_KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "if", "else", "for", "while", "return", "lambda", "None"}
    | {"True", "False", "def", "class", "float", "int", "double", "unsigned", "signed", "const"}
    | {"static", "void", "char", "long", "short", "struct", "sizeof", "self", "env"}
)


def _c_like(path: Path) -> bool:
    return path.suffix in (".c", ".h", ".rs", ".js", ".cpp")


def _code(text: str, c_like: bool) -> str:
    """A line without its comment."""
    if c_like:
        return re.sub(r"/\*.*?(\*/|$)", " ", text).split("//")[0]
    return text.split("#")[0]


def _statement(lines: tuple[str, ...], index: int, c_like: bool, max_lines: int = 12) -> list[int]:
    """0-based indices of the physical lines of the statement that starts at ``index``."""
    depth = 0
    out = []
    for j in range(index, min(len(lines), index + max_lines)):
        out.append(j)
        code = _code(lines[j], c_like)
        depth += sum(code.count(c) for c in "([") - sum(code.count(c) for c in ")]")
        ended = code.rstrip().endswith((";", "{", "}")) or code.lstrip().startswith("#")
        if depth <= 0 and (not c_like or ended) and not code.rstrip().endswith("\\"):
            break
    return out


def _read_names(code: str, rust: bool = False) -> list[str]:
    """Names a statement reads: right of its assignment (or of ``return``/``#define NAME``);
    in Rust also the methods it calls on ``self``."""
    code = re.sub(r"^\s*#\s*define\s+\w+", "", code)
    code = re.sub(r"^\s*return\b", "", code)
    match = _ASSIGN.search(code)
    if match is not None and "(" not in code[: match.start()]:
        code = code[match.end() :]
    names = [m.group(1) for m in _IDENT.finditer(code) if m.group(1) not in _KEYWORDS]
    return names + (re.findall(r"\bself\.(\w+)\s*\(", code) if rust else [])


def enclosing_scope(lines: tuple[str, ...], index: int, c_like: bool, rust: bool = False) -> int:
    """0-based line of the function definition enclosing ``index``, or -1 at file level."""
    indent = len(lines[index]) - len(lines[index].lstrip())
    for j in range(index, -1, -1):
        text = lines[j]
        if rust:  # by indentation, as Python: methods sit indented inside `impl` blocks
            level = len(text) - len(text.lstrip())
            if text.strip() and (level < indent or j == index):
                if RUST_FN.match(text):
                    return j
                if level == 0:
                    return -1
                indent = min(indent, level)
        elif c_like:
            if j < index and text.startswith("}"):
                return -1
            if C_FUNC.match(text):
                return j
        elif text.strip() and not text.lstrip().startswith(("#", "@", ")", "]")):
            level = len(text) - len(text.lstrip())
            if level < indent or j == index:
                if text.lstrip().startswith("def "):
                    return j
                if level == 0:
                    return -1
                indent = min(indent, level)
    return -1


C_FUNC = re.compile(r"^\w[\w\s*]*\b\w+\s*\([^;]*$")
_RUST_QUALIFIERS = r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|unsafe|extern\s+\"C\")\s+)*fn\s+"
RUST_FN = re.compile(_RUST_QUALIFIERS + r"\w+")


def _is_rust(path: Path) -> bool:
    return path.suffix == ".rs"


def _definitions(
    path: Path, lines: tuple[str, ...], name: str, scope: int
) -> list[tuple[int, str | None]]:
    """0-based first lines of statements that define ``name`` as seen from function ``scope``:
    assignments there or at file level, ``#define``, the ``return`` statements of a function
    of that name, and for a parameter of ``scope`` the lines that call that function (with the
    argument passed for it: only that is read further)."""
    c_like, rust = _c_like(path), _is_rust(path)
    assign = _patterns(name, c_like)[:3]
    n = re.escape(name)
    define = re.compile(rf"^\s*#\s*define\s+{n}\b")
    if rust:
        func = re.compile(_RUST_QUALIFIERS + rf"{n}\b")
    elif c_like:
        func = re.compile(rf"^\w[\w\s*]*\b{n}\s*\([^;]*$")
    else:
        func = re.compile(rf"^\s*def\s+{n}\s*\(")
    out: list[tuple[int, str | None]] = []
    for i, text in enumerate(lines):
        stripped = text.strip()
        if c_like and define.search(text):
            out.append((i, None))
        elif func.search(text):
            found = _rust_results(lines, i) if rust else _returns(lines, i, c_like)
            out.extend((j, None) for j in found)
        elif (
            stripped
            and not _is_comment(stripped)
            and any(p.search(_code(stripped, c_like)) for p in assign)
            and enclosing_scope(lines, i, c_like, rust) in (scope, -1)
        ):
            out.append((i, None))
    if scope >= 0:
        out.extend(_call_sites(lines, scope, name, c_like))
    return out


def _call_sites(
    lines: tuple[str, ...], scope: int, name: str, c_like: bool
) -> list[tuple[int, str | None]]:
    """Lines calling the function defined at ``scope``, when ``name`` is one of its parameters,
    each with the argument passed for ``name``."""
    header = " ".join(lines[j] for j in _statement(lines, scope, c_like))
    match = re.search(r"(\w+)\s*\((.*?)\)", header)
    if match is None:
        return []
    params = [re.findall(r"\w+", p.split("=")[0].split(":")[0]) for p in match.group(2).split(",")]
    position = [i for i, words in enumerate(params) if words and words[-1] == name]
    if not position:
        return []
    call = re.compile(rf"(?<![\w.]){re.escape(match.group(1))}\s*\(")
    out: list[tuple[int, str | None]] = []
    for i, text in enumerate(lines):
        if i == scope or _is_comment(text.strip()) or not call.search(_code(text, c_like)):
            continue
        code = " ".join(_code(lines[j], c_like) for j in _statement(lines, i, c_like))
        args = _arguments(code, call)
        keyword = [a.split("=", 1)[1] for a in args if re.match(rf"\s*{name}\s*=[^=]", a)]
        positional = args[position[0]] if position[0] < len(args) else None
        out.append((i, keyword[0] if keyword else positional))
    return out


def _arguments(code: str, call: re.Pattern[str]) -> list[str]:
    """The top-level, comma-separated arguments of the first call ``call`` matches in ``code``."""
    match = call.search(code)
    assert match is not None
    args, depth, current = [], 0, ""
    for char in code[match.end() :]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            args.append(current)
            current = ""
        else:
            current += char
    return [*args, current]


def _returns(lines: tuple[str, ...], start: int, c_like: bool) -> list[int]:
    indent = len(lines[start]) - len(lines[start].lstrip())
    out = []
    for j in range(start + 1, len(lines)):
        text = lines[j]
        if c_like and text.startswith("}"):
            break
        if not c_like and text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        if re.match(r"\s*return\b", text):
            out.append(j)
    return out


def _rust_results(lines: tuple[str, ...], start: int) -> list[int]:
    """The lines a Rust function's value comes from: its ``return`` lines and its tail
    expression (the lines after the body's last top-level statement, an ``if``/``match``
    with its arms included), found by counting braces from the header at ``start``."""
    depth, body, end = 0, -1, -1
    for j in range(start, len(lines)):
        code = _code(lines[j], True)
        if body < 0 and "{" in code:
            body = j
        depth += code.count("{") - code.count("}")
        if body >= 0 and depth <= 0:
            end = j
            break
    if body < 0 or end <= body:
        return []
    out = [j for j in range(body + 1, end) if re.match(r"\s*return\b", lines[j])]
    inner = len(lines[body + 1]) - len(lines[body + 1].lstrip()) if body + 1 < end else 0
    tail = end
    for j in range(end - 1, body, -1):
        code = _code(lines[j], True).rstrip()
        level = len(lines[j]) - len(lines[j].lstrip())
        if code and level <= inner and code.endswith(";"):
            break
        if code:
            tail = j
    return out + [j for j in range(tail, end) if _code(lines[j], True).strip() not in ("", "}")]


def dependencies(
    found: list[SourceLocation], known: set[str], depth: int = 3, limit: int = 16
) -> list[SourceLocation]:
    """The rest of each statement in ``found``, then the lines defining what they read,
    breadth first, ``depth`` hops back within each file (names in ``known`` are not followed)."""
    return [loc for loc, _ in dependency_hops(found, known, depth)][:limit]


def dependency_hops(
    found: list[SourceLocation], known: set[str], depth: int, files: Sequence[Path] = ()
) -> list[tuple[SourceLocation, int]]:
    """:func:`dependencies` with each line's distance in hops (0: rest of a found statement);
    a name a file does not define is looked for at file level in the other ``files`` (a
    constant in an included header, a helper in another module of the port)."""
    out: list[tuple[SourceLocation, int]] = []
    seen: set[tuple[str, int]] = {(loc.file, loc.line) for loc in found}
    followed: set[tuple[str, str, int]] = set()
    hop = 0

    def add(path: Path, lines: tuple[str, ...], first: int) -> list[int]:
        statement = _statement(lines, first, _c_like(path))
        for j in statement:
            if (str(path), j + 1) not in seen:
                seen.add((str(path), j + 1))
                out.append((SourceLocation(file=str(path), line=j + 1, text=lines[j].strip()), hop))
        return statement

    # (file, its lines, a statement's line indices, the only code of it to read, if not all)
    Frontier = list[tuple[Path, tuple[str, ...], list[int], str | None]]
    frontier: Frontier = []
    for loc in found:
        path = Path(loc.file)
        if path.is_file():
            lines = source_lines(str(path), path.stat().st_mtime)
            frontier.append((path, lines, add(path, lines, loc.line - 1), None))
    for hop in range(1, depth + 1):  # noqa: B007 - add() records the current hop
        following: Frontier = []
        for path, lines, statement, only in frontier:
            code = " ".join(_code(lines[j], _c_like(path)) for j in statement)
            names = _IDENT.findall(only) if only is not None else _read_names(code, _is_rust(path))
            for name in names:
                scope = enclosing_scope(lines, statement[0], _c_like(path), _is_rust(path))
                if name in known or name in _KEYWORDS or (str(path), name, scope) in followed:
                    continue
                followed.add((str(path), name, scope))
                defined = _definitions(path, lines, name, scope)
                for i, argument in defined:
                    following.append((path, lines, add(path, lines, i), argument))
                for other in [] if defined else [f for f in files if f != path and f.is_file()]:
                    text = source_lines(str(other), other.stat().st_mtime)
                    for i, argument in _definitions(other, text, name, -1):
                        following.append((other, text, add(other, text, i), argument))
        frontier = following
    return out
