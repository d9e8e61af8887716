"""The agent's workspace tools: read_file, write_file, edit_file, list_files, run_verify,
run_command. Every path is resolved inside the workspace; a path that would leave it (``..``,
an absolute path elsewhere, a symlink pointing out) is refused. A tool's failure, whatever
raised it, is reported to the model as an error result, never raised into the agent loop.

Every result is cut to ``ToolLimits.observation_chars`` (head and tail kept), and ``read_file``
reads long files a range of lines at a time, so one observation cannot fill the context. Paths
of the workspace, the project and the Python installation are hidden from what the model reads.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.agents.host_paths import hide_host_paths
from envforge.agents.messages import INVALID_ARGUMENTS, ToolCall, ToolResult, ToolSpec
from envforge.prompts.tools import tool_specs
from envforge.sandbox.base import Sandbox
from envforge.sandbox.process import ProcessSandbox
from envforge.untrusted.port_files import list_port
from envforge.untrusted.regular import NotPlainFile, read_file, write_file

VerifyFn = Callable[[str], str]
"""Runs the verifier at the given levels (e.g. ``"0-3"``) and returns the report as text."""
HEADER_ROOM = 200
"""Characters kept free for read_file's header line within the observation cap."""
FILE_BYTES = 16 * 2**20
"""Largest workspace file read_file or edit_file reads (ports are tens of kilobytes)."""
HIDDEN = {".git", "__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


@dataclass(frozen=True)
class ToolLimits:
    read_chars: int = 16_000
    """read_file returns whole lines up to this many characters, then says how to read on."""
    observation_chars: int = 16_000
    """Any tool result longer than this is cut to its head and tail."""
    list_limit: int = 500


class WorkspaceTools:
    def __init__(
        self,
        workspace: Path,
        verify: VerifyFn | None = None,
        sandbox: Sandbox | None = None,
        levels: str = "0-3",
        limits: ToolLimits | None = None,
        port_dir: Path | None = None,
    ) -> None:
        self.root = workspace.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.port_dir = port_dir if port_dir is not None else self.root
        """The folder whose files are the port (the whole workspace when not given)."""
        self.verify_fn = verify
        self.levels = levels
        """The levels the port must pass to be done (the job's), as ``--levels`` takes them."""
        self.sandbox = sandbox or ProcessSandbox()
        self.limits = limits or ToolLimits()
        self.specs: tuple[ToolSpec, ...] = tuple(
            ToolSpec(*spec)
            for spec in tool_specs(
                levels,
                wall_s=self.sandbox.limits.wall_s,
                output_chars=self.sandbox.limits.output_chars,
                read_chars=self.limits.read_chars,
                list_limit=self.limits.list_limit,
            )
        )
        self._handlers: dict[str, Callable[..., str]] = {
            "read_file": self.read_file,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "list_files": self.list_files,
            "run_verify": self.run_verify,
            "run_command": self.run_command,
        }

    # ---- dispatch ------------------------------------------------------------------------
    def execute(self, call: ToolCall) -> ToolResult:
        handler = self._handlers.get(call.name)
        if handler is None:
            known = ", ".join(self._handlers)
            return ToolResult(
                call.id, call.name, f"unknown tool {call.name!r}; tools: {known}", True
            )
        try:
            output = handler(**_arguments(call, self.specs))
        except ToolError as e:
            return self._result(call, str(e), True)
        except Exception as e:  # an OSError, a bad encoding, a failing verifier: the model's to see
            return self._result(call, f"{call.name} failed: {type(e).__name__}: {e}", True)
        return self._result(call, output, False)

    def _result(self, call: ToolCall, text: str, is_error: bool) -> ToolResult:
        text = hide_host_paths(text, [self.root])
        return ToolResult(
            call.id, call.name, cut_middle(text, self.limits.observation_chars), is_error
        )

    def port_digest(self) -> str:
        """A digest of the port's files (names and bytes, links by name): equal digests mean
        nothing in the port changed, whatever tools ran in between."""
        h = hashlib.sha256()
        if not self.port_dir.is_dir():
            return h.hexdigest()
        files = list_port(self.port_dir, follow_root=False)
        for name in files.names:
            if any(part in HIDDEN for part in Path(name).parts):
                continue
            data = files.read_bytes(name)
            h.update(f"{name}\0{len(data) if data is not None else -1}\0".encode())
            h.update(data or b"")
        for refused in files.refused:
            h.update(f"refused\0{refused.line()}\0".encode())
        return h.hexdigest()

    # ---- paths ---------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """``path`` inside the workspace, or ToolError. Symlinks are followed before checking."""
        if not isinstance(path, str) or "\x00" in path:
            raise ToolError("path must be a string")
        candidate = (self.root / path).resolve()
        if candidate != self.root and not candidate.is_relative_to(self.root):
            raise ToolError(f"{path}: outside the workspace (paths are relative to it)")
        return candidate

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."

    # ---- tools ---------------------------------------------------------------------------
    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path}: no such file")
        lines = self._read(path, target).decode(errors="replace").splitlines(keepends=True)
        first = max(1, int(start_line))
        last = len(lines) if end_line is None else min(len(lines), int(end_line))
        if first > max(1, len(lines)):
            raise ToolError(f"{path}: start_line {first} is past the end ({len(lines)} lines)")
        if last < first and lines:
            raise ToolError(f"{path}: end_line {end_line} is before start_line {first}")
        # room for the header, so the observation cap never cuts into the lines read
        limit = min(self.limits.read_chars, self.limits.observation_chars - HEADER_ROOM)
        shown: list[str] = []
        size = 0
        for line in lines[first - 1 : last]:
            if shown and size + len(line) > limit:
                break
            shown.append(line)
            size += len(line)
        text = "".join(shown)
        until = first + len(shown) - 1
        if first == 1 and until == len(lines):
            return text
        more = ""
        if until < last:
            more = f"; the next call: start_line={until + 1}"
        return f"[{path}: lines {first}-{until} of {len(lines)}{more}]\n{text}"

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path}: is a folder")
        for parent in target.relative_to(self.root).parents:
            if (self.root / parent).is_file():
                raise ToolError(f"{path}: {parent} is a file, not a folder")
        self._write(path, target, content)
        return f"wrote {len(content)} characters to {self.relative(target)}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path}: no such file")
        if not old:
            raise ToolError("old must not be empty")
        try:
            text = self._read(path, target).decode()
        except UnicodeDecodeError:
            raise ToolError(f"{path}: not a UTF-8 text file; edit_file edits text only") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"{path}: old text not found (it must match exactly, whitespace included)"
            )
        if count > 1:
            raise ToolError(
                f"{path}: old text occurs {count} times; include more lines to make it unique"
            )
        self._write(path, target, text.replace(old, new, 1))
        line = text[: text.index(old)].count("\n") + 1
        return f"edited {self.relative(target)} at line {line}"

    def _read(self, path: str, target: Path) -> bytes:
        """A workspace file by the one rule: a FIFO or device the agent made is refused rather
        than blocking the host, a file past the cap rather than filling its memory."""
        try:
            return read_file(target, FILE_BYTES, one_link=False)
        except NotPlainFile as e:
            raise ToolError(f"{path}: {e.why}") from None

    def _write(self, path: str, target: Path, content: str) -> None:
        """Written new by the one rule (a FIFO there is replaced, not opened), mode kept."""
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            mode = 0o644
        try:
            write_file(self.root, target.relative_to(self.root), content.encode(), mode)
        except NotPlainFile as e:
            raise ToolError(f"{path}: {e.why}") from None

    def list_files(self, path: str = ".") -> str:
        folder = self.resolve(path)
        if not folder.is_dir():
            raise ToolError(f"{path}: no such folder")
        entries = []
        for item in sorted(folder.rglob("*")):
            if any(part in HIDDEN for part in item.relative_to(self.root).parts):
                continue
            if item.is_file():
                entries.append(f"{self.relative(item)}  ({item.stat().st_size} bytes)")
            if len(entries) >= self.limits.list_limit:
                entries.append("... (more files not listed)")
                break
        return "\n".join(entries) or "(no files)"

    def run_verify(self, levels: str | None = None) -> str:
        if self.verify_fn is None:
            raise ToolError("run_verify is not available in this session")
        return self.verify_fn(str(levels or self.levels))

    def run_command(self, command: str) -> str:
        if not command.strip():
            raise ToolError("empty command")
        return self.sandbox.run(command, self.root).describe()


def _arguments(call: ToolCall, specs: tuple[ToolSpec, ...]) -> dict[str, Any]:
    """The call's arguments checked against the tool's schema (names and string types)."""
    if INVALID_ARGUMENTS in call.arguments:
        raw = str(call.arguments[INVALID_ARGUMENTS])
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        raise ToolError(
            f"{call.name}: the arguments were not valid JSON (a JSON object is expected): "
            f"{shown!r}; the call was not run, send it again"
        )
    schema = next(s.parameters for s in specs if s.name == call.name)
    allowed = schema.get("properties", {})
    unknown = sorted(set(call.arguments) - set(allowed))
    missing = sorted(set(schema.get("required", [])) - set(call.arguments))
    if unknown or missing:
        problems = [f"unknown argument(s) {unknown}"] if unknown else []
        problems += [f"missing argument(s) {missing}"] if missing else []
        raise ToolError(f"{call.name}: {'; '.join(problems)}; expected {sorted(allowed)}")
    arguments = dict(call.arguments)
    for name, value in call.arguments.items():
        kind = allowed[name].get("type")
        if kind == "string" and not isinstance(value, str):
            raise ToolError(f"{call.name}: argument {name!r} must be a string")
        if kind == "integer":
            arguments[name] = _integer(call.name, name, value)
    return arguments


def _integer(tool: str, name: str, value: object) -> int:
    """An integer argument, also as the numeric string many models send (``"120"``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ToolError(f"{tool}: argument {name!r} must be an integer, got {value!r}")


def cut_middle(text: str, limit: int) -> str:
    """``text`` whole when short, else its head and tail around a note of what was cut."""
    if len(text) <= limit:
        return text
    head = text[: limit // 3]
    tail = text[len(text) - (limit - len(head)) :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n... [{cut} characters cut from the middle of this output] ...\n{tail}"
