"""Cassettes: record a live run's request/response pairs to JSONL, replay them offline.

The first line names the recorded model (so a replay is priced like the original run); every
other line is one call. Replay compares each request with the recorded one and stops loudly at
the first difference: a replay that silently answered a different question would prove nothing.
Cassettes hold requests and responses only, never headers or credentials.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envforge.agents.messages import (
    ModelRequest,
    ModelResponse,
    request_to_dict,
    response_from_dict,
    response_to_dict,
)
from envforge.agents.model import Model
from envforge.errors import BadInput, EnvforgeError

FORMAT_VERSION = 1
PREFIX = "replay:"


class CassetteMismatch(EnvforgeError):
    """The replayed run asked something the recorded run did not."""


def first_difference(recorded: Any, actual: Any, path: str = "request") -> str | None:
    """Where two JSON values first differ, as ``path: recorded ... vs actual ...``."""
    if type(recorded) is not type(actual):
        return f"{path}: recorded {_short(recorded)} vs now {_short(actual)}"
    if isinstance(recorded, dict):
        for key in list(recorded) + [k for k in actual if k not in recorded]:
            if key not in recorded or key not in actual:
                return f"{path}.{key}: present in only one of recorded/now"
            found = first_difference(recorded[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(recorded, list):
        for i, (a, b) in enumerate(zip(recorded, actual, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(actual):
            return f"{path}: recorded {len(recorded)} items vs now {len(actual)}"
        return None
    if recorded != actual:
        return f"{path}: recorded {_short(recorded)} vs now {_short(actual)}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RecordingModel:
    """Wraps a live model and appends every call to a cassette as it happens."""

    def __init__(self, inner: Model, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {"cassette": FORMAT_VERSION, "model": inner.name}
        self.path.write_text(json.dumps(header) + "\n")

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.inner.complete(request)
        line = {"request": request_to_dict(request), "response": response_to_dict(response)}
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")
        return response


class ReplayModel:
    """Answers from a cassette, call by call, after checking each request matches."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            lines = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        except FileNotFoundError:
            raise BadInput(f"cassette not found: {self.path}") from None
        except json.JSONDecodeError as e:
            raise BadInput(f"{self.path}: not a cassette (line {e.lineno}: {e.msg})") from None
        if not lines or lines[0].get("cassette") != FORMAT_VERSION:
            raise BadInput(f"{self.path}: not a version {FORMAT_VERSION} cassette")
        self.name = str(lines[0]["model"])
        self.calls = lines[1:]
        self.position = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        if self.position >= len(self.calls):
            raise CassetteMismatch(
                f"{self.path}: the run made more calls than the {len(self.calls)} recorded"
            )
        recorded = self.calls[self.position]
        difference = first_difference(recorded["request"], request_to_dict(request))
        if difference is not None:
            raise CassetteMismatch(
                f"{self.path}: call {self.position + 1} diverges from the recording at {difference}"
            )
        self.position += 1
        return response_from_dict(recorded["response"])


def load_replay(model: str) -> ReplayModel:
    return ReplayModel(model.removeprefix(PREFIX))
