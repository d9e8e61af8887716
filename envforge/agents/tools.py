"""The agent's workspace tools: read_file, write_file, edit_file, list_files, run_verify,
run_command. Every path is resolved inside the workspace; a path that would leave it (``..``,
an absolute path elsewhere, a symlink pointing out) is refused. A tool's failure is reported to
the model as an error result, never raised into the agent loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.agents.messages import INVALID_ARGUMENTS, ToolCall, ToolResult, ToolSpec
from envforge.prompts.render import scrub_paths, tool_specs
from envforge.sandbox.base import Sandbox
from envforge.sandbox.process import ProcessSandbox

VerifyFn = Callable[[str], str]
"""Runs the verifier at the given levels (e.g. ``"0-3"``) and returns the report as text."""
HIDDEN = {".git", "__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


@dataclass(frozen=True)
class ToolLimits:
    read_chars: int = 100_000
    list_limit: int = 500


class WorkspaceTools:
    def __init__(
        self,
        workspace: Path,
        verify: VerifyFn | None = None,
        sandbox: Sandbox | None = None,
        levels: str = "0-3",
        limits: ToolLimits | None = None,
    ) -> None:
        self.root = workspace.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.verify_fn = verify
        self.sandbox = sandbox or ProcessSandbox()
        self.limits = limits or ToolLimits()
        self.specs: tuple[ToolSpec, ...] = tool_specs(
            levels,
            wall_s=self.sandbox.limits.wall_s,
            output_chars=self.sandbox.limits.output_chars,
            read_chars=self.limits.read_chars,
            list_limit=self.limits.list_limit,
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
            return ToolResult(call.id, call.name, str(e), True)
        return ToolResult(call.id, call.name, scrub_paths(output, [self.root]))

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
    def read_file(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path}: no such file")
        text = target.read_text(errors="replace")
        limit = self.limits.read_chars
        if len(text) > limit:
            return text[:limit] + f"\n... [cut: the file has {len(text)} characters]"
        return text

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path}: is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"wrote {len(content)} characters to {self.relative(target)}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path}: no such file")
        if not old:
            raise ToolError("old must not be empty")
        text = target.read_text()
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"{path}: old text not found (it must match exactly, whitespace included)"
            )
        if count > 1:
            raise ToolError(
                f"{path}: old text occurs {count} times; include more lines to make it unique"
            )
        target.write_text(text.replace(old, new, 1))
        line = text[: text.index(old)].count("\n") + 1
        return f"edited {self.relative(target)} at line {line}"

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

    def run_verify(self, levels: str = "0-3") -> str:
        if self.verify_fn is None:
            raise ToolError("run_verify is not available in this session")
        return self.verify_fn(str(levels))

    def run_command(self, command: str) -> str:
        if not command.strip():
            raise ToolError("empty command")
        return self.sandbox.run(command, self.root).describe()


def _arguments(call: ToolCall, specs: tuple[ToolSpec, ...]) -> dict[str, Any]:
    """The call's arguments checked against the tool's schema (names and string types)."""
    if INVALID_ARGUMENTS in call.arguments:
        raise ToolError("the arguments were not valid JSON; send a JSON object")
    schema = next(s.parameters for s in specs if s.name == call.name)
    allowed = schema.get("properties", {})
    unknown = sorted(set(call.arguments) - set(allowed))
    missing = sorted(set(schema.get("required", [])) - set(call.arguments))
    if unknown or missing:
        problems = [f"unknown argument(s) {unknown}"] if unknown else []
        problems += [f"missing argument(s) {missing}"] if missing else []
        raise ToolError(f"{call.name}: {'; '.join(problems)}; expected {sorted(allowed)}")
    for name, value in call.arguments.items():
        if allowed[name].get("type") == "string" and not isinstance(value, str):
            raise ToolError(f"{call.name}: argument {name!r} must be a string")
    return dict(call.arguments)
