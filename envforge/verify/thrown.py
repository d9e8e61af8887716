"""Where an implementation threw: the source line a Rust panic, a Python traceback or a
JavaScript stack names, and the handler (function, and in Rust the ``match`` arms) holding it.

A finding for a crash names no diverging field; its crash site is then what localizes it. An
emulator port that indexes out of bounds in its ``EX9E`` arm is found at that arm, and the
finding says so (``execute [0xE => 0x9E]``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from envforge.verify.findings import SourceLocation
from envforge.verify.localize import C_FUNC, RUST_FN, enclosing_scope, source_lines

_JS_FRAME = re.compile(r"(/[^\s():]+\.(?:js|mjs|cjs)):(\d+):\d+")


def stack_locations(stack: str, limit: int = 4) -> list[SourceLocation]:
    """The source lines a JavaScript stack names, innermost first (envforge's own runner and
    node's internals left out): where a reference threw."""
    out: list[SourceLocation] = []
    for path_text, line_text in _JS_FRAME.findall(stack):
        path = Path(path_text)
        if path.name == "node_runner.js" or not path.is_file():
            continue
        lines = source_lines(str(path), path.stat().st_mtime)
        number = int(line_text)
        if 1 <= number <= len(lines):
            loc = SourceLocation(file=str(path), line=number, text=lines[number - 1].strip())
            if loc not in out:
                out.append(loc)
        if len(out) >= limit:
            break
    return out


# Rust >= 1.73: "panicked at src/chip8.rs:214:24:"; before: "panicked at 'msg', src/x.rs:1:2"
_RUST_PANIC = re.compile(r"panicked at (?:'.*?', )?([^\s:']+\.rs):(\d+):\d+", re.DOTALL)
# an error that says where it was made (a port's `#[track_caller]` check: "(at src/lib.rs:254:9)")
_RUST_AT = re.compile(r"\(at ([^\s:'()]+\.rs):(\d+):\d+\)")
_PYTHON_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _source_for(path_text: str, sources: Sequence[Path]) -> Path | None:
    """The source file a message names, by path or by its end (rustc names ``src/x.rs``)."""
    wanted = Path(path_text)
    for source in sources:
        if source == wanted or str(source).endswith("/" + path_text.lstrip("./")):
            return source
    return None


def _location(path: Path, number: int) -> SourceLocation | None:
    if not path.is_file():
        return None
    lines = source_lines(str(path), path.stat().st_mtime)
    if not 1 <= number <= len(lines):
        return None
    return SourceLocation(file=str(path), line=number, text=lines[number - 1].strip())


def thrown_at(
    text: str, sources: Sequence[Path], limit: int = 4, any_script: bool = False
) -> list[SourceLocation]:
    """Lines of ``sources`` where the failure in ``text`` (a message, a traceback, a stderr
    tail) was raised, innermost first: a Rust panic's location, a Rust error's own
    ``(at src/x.rs:L:C)``, the frames of a Python traceback in those files, a JavaScript
    stack's frames (with ``any_script``, in any script: a node reference's modules; never for
    a port, whose text may name any file on the host)."""
    found: list[SourceLocation] = []
    for path_text, line in [*_RUST_PANIC.findall(text), *_RUST_AT.findall(text)]:
        source = _source_for(path_text, sources)
        loc = _location(source, int(line)) if source else None
        if loc is not None and loc not in found:
            found.append(loc)
    frames = _PYTHON_FRAME.findall(text)
    for path_text, line in reversed(frames):  # a traceback lists the innermost frame last
        source = _source_for(path_text, sources)
        loc = _location(source, int(line)) if source else None
        if loc is not None and loc not in found:
            found.append(loc)
    if any_script:
        found += [loc for loc in stack_locations(text, limit) if loc not in found]
    return found[:limit]


def handler_at(lines: Sequence[str], line: int, suffix: str) -> str | None:
    """The handler holding 1-based ``line`` of a source with file suffix ``suffix``: the
    enclosing function, and in Rust the ``match`` arms around the line (``alu [0x6]``), so
    that the inline arms of a dispatcher are handlers of their own. None at file level."""
    if not 1 <= line <= len(lines):
        return None
    if suffix == ".rs":
        return _rust_handler(lines, line - 1)
    c_like = suffix in (".c", ".h", ".js", ".cpp")
    start = enclosing_scope(tuple(lines), line - 1, c_like)
    if start < 0:
        return None
    pattern = r"(\w+)\s*\(" if c_like else r"\bdef\s+(\w+)"
    match = re.search(pattern, lines[start]) if not c_like or C_FUNC.match(lines[start]) else None
    return match.group(1) if match else None


def _rust_handler(lines: Sequence[str], index: int) -> str | None:
    """Read upwards by indentation from line ``index``: the ``match`` arms passed, up to the
    ``fn`` header (a multi-line signature's closing ``) -> T {`` is passed over)."""
    arms: list[str] = []
    indent = len(lines[index]) - len(lines[index].lstrip()) + 1  # the line itself may be an arm
    for j in range(index, -1, -1):
        code = lines[j].split("//")[0]
        level = len(code) - len(code.lstrip())
        if not code.strip() or level >= indent or code.lstrip().startswith((")", "]", "}")):
            continue
        indent = level
        fn = RUST_FN.match(code)
        if fn is not None:
            name = fn.group(0).split()[-1]
            return name + (f" [{' => '.join(reversed(arms))}]" if arms else "")
        if level == 0:
            return None
        arm = re.match(r"\s*([^=]+?)\s*=>", code)
        if arm is not None:
            arms.append(arm.group(1))
    return None


def handler_of(location: SourceLocation) -> str | None:
    path = Path(location.file)
    if not path.is_file():
        return None
    return handler_at(source_lines(str(path), path.stat().st_mtime), location.line, path.suffix)
