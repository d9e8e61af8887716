"""A model that answers from a JSON script, one entry per call (``scripted:<file.json>`` in a
batch manifest), for tests and demos:

    {"model": "claude-sonnet-4-6",          (optional: price it like this model)
     "responses": [
        {"text": "...", "calls": [["write_file", {"path": "port/pong.py", "content": "..."}]],
         "usage": {"input_tokens": 1000, "output_tokens": 200}},
        {"error": "provider overloaded"}    (this call fails with a ModelError)
     ]}

A bare JSON list is the same as ``{"responses": [...]}`` (model name ``scripted``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.agents.messages import ModelRequest, ModelResponse, Usage
from envforge.agents.model import ModelError
from envforge.agents.scripted import reply
from envforge.errors import BadInput
from envforge.untrusted.input_files import SCRIPT_BYTES, InputFileError, read_text

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class ScriptError:
    message: str


class ScriptFileModel:
    """Answers call ``k`` with the script's entry ``k``, whatever the request (a real Model)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            data = json.loads(read_text(path, "model script", SCRIPT_BYTES))
        except InputFileError as e:
            if e.reason == "not found":
                raise BadInput(f"model script not found: {path}") from None
            raise
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}: not a JSON model script ({e})") from None
        except RecursionError:
            raise BadInput(f"{path}: not a JSON model script (nested too deep)") from None
        if isinstance(data, list):
            data = {"responses": data}
        if not isinstance(data, dict) or not isinstance(data.get("responses"), list):
            raise BadInput(f"{path}: expected a list of responses or {{'responses': [...]}}")
        self.name = str(data.get("model", "scripted"))
        self.entries = [_entry(path, i, e) for i, e in enumerate(data["responses"], 1)]
        self.position = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        if self.position >= len(self.entries):
            raise ModelError(
                f"{self.path.name}: no scripted response left for call {self.position + 1}"
            )
        entry = self.entries[self.position]
        self.position += 1
        if isinstance(entry, ScriptError):
            raise ModelError(entry.message)
        return entry


def _entry(path: Path, index: int, raw: Any) -> ModelResponse | ScriptError:
    where = f"{path}: response {index}"
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: expected a table, got {raw!r:.60}")
    if "error" in raw:
        return ScriptError(str(raw["error"]))
    unknown = sorted(set(raw) - {"text", "calls", "usage"})
    if unknown:
        raise BadInput(f"{where}: unknown key {unknown[0]!r} (text, calls, usage, error)")
    usage = raw.get("usage", {})
    if not isinstance(usage, dict) or set(usage) - set(USAGE_KEYS):
        raise BadInput(f"{where}: usage takes {', '.join(USAGE_KEYS)}")
    calls = raw.get("calls", [])
    try:
        pairs = [(str(name), dict(arguments)) for name, arguments in calls]
    except (TypeError, ValueError):
        raise BadInput(f"{where}: calls are [name, {{arguments}}] pairs") from None
    return reply(str(raw.get("text", "")), pairs, Usage(**usage), turn=index)
