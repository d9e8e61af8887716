"""Handler-level localization: which of the env's handlers (an emulator's opcode handlers) a
mutated line belongs to, and which ones the killing finding names.

The env supplies the knowledge (``[verify] handlers = "file.py:function"`` in env.toml): a
function ``f(file, scope, text) -> list[str]`` that maps a source line to the handlers it
belongs to, given the file's path relative to the implementation's directory (``src/chip8.rs``,
``chip8.py``), the line's scope and its stripped text. The scope is what
``verify.thrown.handler_at`` says (a function, and in Rust the ``match`` arms around the line:
``alu [0x6]``, ``execute [0xE => 0x9E]``) or, for a Python line at module level, the name the
statement assigns (a dispatch table: ``ALU``). Lines in no handler (a step's timers, a reset,
the fetch) map to no handler; code shared by a few handlers (a ``skip`` helper) to all of them.

A kill is **handler-localized** when its finding names a handler of the mutated line: the name
appears in the finding's message or in its ``[verify] explain`` text (but that text's last line,
which ``verify/context.py`` leaves out of the message too: chip8's list of every instruction
run), or the finding is a crash whose site maps to it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from envforge.spec import EnvSpec
from envforge.verify.strategies import spec_function
from envforge.verify.thrown import handler_at

HandlerHook = Callable[[str, str, str], Iterable[str]]

TEXT_LIMIT = 1500
"""Characters of a finding's message and explain text kept in each mutant's JSON."""


@lru_cache(maxsize=32)
def _module_assignments(source: str) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, name) of each module-level statement of a Python source that
    assigns one name: ``NAME = ...``, or a loop that fills ``NAME[...]``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    spans = []
    for stmt in tree.body:
        targets: set[str] = set()
        if isinstance(stmt, ast.Assign):
            targets = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.For | ast.While):
            targets = {
                t.value.id
                for node in ast.walk(stmt)
                if isinstance(node, ast.Assign)
                for t in node.targets
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
            }
        if len(targets) == 1:
            spans.append((stmt.lineno, stmt.end_lineno or stmt.lineno, targets.pop()))
    return tuple(spans)


def scope_at(source: str, line: int, suffix: str) -> str | None:
    """The scope of 1-based ``line``: ``handler_at``'s function (and Rust ``match`` arms), or
    for Python at module level the one name the statement spanning the line assigns."""
    lines = source.splitlines()
    scope = handler_at(lines, line, suffix)
    if scope is None and suffix == ".py":
        for first, last, name in _module_assignments(source):
            if first <= line <= last:
                return name
    return scope


def _token(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")


def names_in(text: str, names: Iterable[str]) -> list[str]:
    """The ``names`` that appear in ``text`` as whole tokens (``8XY6``, not ``op_8xy6``)."""
    return sorted(n for n in set(names) if _token(n).search(text) is not None)


def finding_text(finding: Mapping[str, Any] | None) -> str:
    """What a finding says in words: its message and its explain text but the last line (the
    same lines ``verify/context.py`` appends to the message)."""
    if not finding:
        return ""
    explain = str((finding.get("extra") or {}).get("explain") or "")
    lines = explain.splitlines()
    message = str(finding.get("message") or "")
    if len(lines) > 1:
        message = message.replace(lines[-1], "")
        lines = lines[:-1]
    return "\n".join([message, *lines])


def crash_site(finding: Mapping[str, Any] | None) -> tuple[str, str, str] | None:
    """(file, scope, text) of a crash finding's site, as ``verify/runner.failure_finding``
    records it (``extra["handler"]``, the first of the failing side's source lines)."""
    if not finding:
        return None
    extra = finding.get("extra") or {}
    scope = extra.get("handler")
    if not scope:
        return None
    key = "reference_lines" if extra.get("side") == "reference" else "port_lines"
    thrown = (finding.get(key) or [None])[0] or {}
    return str(thrown.get("file", "")), str(scope), str(thrown.get("text", ""))


class HandlerMap:
    """The env's handlers over the mutated side's files (``files``: relative path -> text)."""

    def __init__(self, hook: HandlerHook, files: Mapping[str, str]) -> None:
        self.hook = hook
        self.files = dict(files)
        self._universe: list[str] | None = None

    @classmethod
    def for_spec(cls, spec: EnvSpec, files: Mapping[str, str]) -> HandlerMap | None:
        """The spec's map over ``files``, or None when it declares no handlers."""
        hook = spec_function(spec, "handlers")
        return None if hook is None else cls(hook, files)

    def of_scope(self, file: str, scope: str | None, text: str) -> list[str]:
        if scope is None:
            return []
        return sorted(set(self.hook(file, scope, text.strip())))

    def at(self, file: str, source: str, line: int) -> list[str]:
        """Handlers of 1-based ``line`` of ``file`` (``source``: its unmutated text)."""
        lines = source.splitlines()
        if not 1 <= line <= len(lines):
            return []
        scope = scope_at(source, line, Path(file).suffix)
        return self.of_scope(file, scope, lines[line - 1])

    @property
    def universe(self) -> list[str]:
        """Every handler some line of the files belongs to: the names a finding may name."""
        if self._universe is None:
            names: set[str] = set()
            for file, source in self.files.items():
                for line in range(1, len(source.splitlines()) + 1):
                    names.update(self.at(file, source, line))
            self._universe = sorted(names)
        return self._universe

    def relative(self, path: str) -> str:
        """``path`` (a crash site's, in a mutant's copy) as one of the files, else its name."""
        for file in self.files:
            if path == file or path.endswith("/" + file):
                return file
        return Path(path).name

    def first_named(self, finding: Mapping[str, Any] | None) -> str | None:
        """The handler a finding names first: its crash site's, else the earliest name in its
        words (an env's explain that leads with its likeliest culprit makes this that one)."""
        site = crash_site(finding)
        if site is not None:
            file, scope, text = site
            at_site = self.of_scope(self.relative(file), scope, text)
            if len(at_site) == 1:
                return at_site[0]
        text = finding_text(finding)
        found = [
            (match.start(), n)
            for n in self.universe
            if (match := _token(n).search(text)) is not None
        ]
        return min(found)[1] if found else None

    def named(self, finding: Mapping[str, Any] | None) -> list[str]:
        """The handlers a finding names: in its words, or as the handler of its crash site."""
        names = set(names_in(finding_text(finding), self.universe))
        site = crash_site(finding)
        if site is not None:
            file, scope, text = site
            names.update(self.of_scope(self.relative(file), scope, text))
        return sorted(names)


def truncated(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
