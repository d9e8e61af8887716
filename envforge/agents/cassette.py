"""Cassettes: record a live run's request/response pairs to JSONL, replay them offline.

The first line names the recorded model (so a replay is priced like the original run); every
other line is one call. ``--record`` appends: a cassette that exists (for the same model) gets
the new calls after its own. A call's line stores what is new in its request: ``keep`` says how
many messages it shares with the request on the line before, ``messages`` holds the rest, and
``system``/``tools`` appear only when they changed. (Version 1 lines, which hold the whole
request, are still read.) Replay rebuilds each request, compares it with the one the run makes
and stops loudly at the first difference, showing the differing text: a replay that silently
answered a different question would prove nothing. Cassettes hold requests and responses only,
never headers or credentials.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envforge.agents.messages import (
    Model,
    ModelRequest,
    ModelResponse,
    request_to_dict,
    response_from_dict,
    response_to_dict,
)
from envforge.errors import BadInput, EnvforgeError
from envforge.untrusted.input_files import SCRIPT_BYTES, InputFileError, read_text

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
CONTEXT_CHARS = 60
"""Characters shown on each side of the first differing character of a mismatch."""


class CassetteMismatch(EnvforgeError):
    """The replayed run asked something the recorded run did not."""


def first_difference(recorded: Any, actual: Any, path: str = "request") -> str | None:
    """Where two JSON values first differ, as ``path: recorded ... vs now ...``."""
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
    if isinstance(recorded, str) and recorded != actual:
        return f"{path}: {text_difference(recorded, actual)}"
    if recorded != actual:
        return f"{path}: recorded {_short(recorded)} vs now {_short(actual)}"
    return None


def text_difference(recorded: str, now: str) -> str:
    """The first differing character of two texts, with the text around it on both sides."""
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
        min(len(recorded), len(now)),
    )
    line = recorded.count("\n", 0, at) + 1
    start = max(0, at - CONTEXT_CHARS)

    def around(text: str) -> str:
        shown = text[start : at + CONTEXT_CHARS]
        return (
            ("..." if start else "")
            + repr(shown)
            + ("..." if at + CONTEXT_CHARS < len(text) else "")
        )

    return (
        f"texts differ at character {at} (line {line}): recorded {around(recorded)} "
        f"vs now {around(now)}"
    )


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_line(previous: dict[str, Any] | None, request: dict[str, Any]) -> dict[str, Any]:
    """What a call's line stores of ``request``: what is new since ``previous``."""
    old = previous["messages"] if previous is not None else []
    keep = 0
    while keep < min(len(old), len(request["messages"])) and old[keep] == request["messages"][keep]:
        keep += 1
    line = {"keep": keep, "messages": request["messages"][keep:]}
    for key in ("system", "tools"):
        if previous is None or previous[key] != request[key]:
            line[key] = request[key]
    line["max_tokens"] = request["max_tokens"]
    line["temperature"] = request["temperature"]
    return line


def expand_line(previous: dict[str, Any] | None, line: dict[str, Any]) -> dict[str, Any]:
    """The whole request a call's line stands for (the inverse of ``call_line``)."""
    if "request" in line:  # version 1: the whole request
        return dict(line["request"])
    if previous is None and ("system" not in line or "tools" not in line or line["keep"]):
        raise ValueError("the first call must hold its whole request")
    base = previous or {"messages": []}
    return {
        "system": line.get("system", base.get("system")),
        "messages": base["messages"][: line["keep"]] + line["messages"],
        "tools": line.get("tools", base.get("tools")),
        "max_tokens": line["max_tokens"],
        "temperature": line["temperature"],
    }


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        text = read_text(path, "cassette", SCRIPT_BYTES)
        lines = [json.loads(line) for line in text.splitlines() if line]
    except InputFileError as e:
        if e.reason == "not found":
            raise BadInput(f"cassette not found: {path}") from None
        raise
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not a cassette (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise BadInput(f"{path}: not a cassette (JSON nested too deep)") from None
    if not lines or lines[0].get("cassette") not in READABLE_VERSIONS:
        raise BadInput(f"{path}: not a cassette (version {', '.join(map(str, READABLE_VERSIONS))})")
    return lines[0], lines[1:]


class RecordingModel:
    """Wraps a live model and appends every call to a cassette as it happens."""

    def __init__(self, inner: Model, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.previous: dict[str, Any] | None = None
        if self.path.is_file() and self.path.stat().st_size:
            header, _ = _read(self.path)
            if header.get("model") != inner.name:
                raise BadInput(
                    f"--record {self.path}: it holds calls of {header.get('model')!r}, "
                    f"not {inner.name!r}; record to another file"
                )
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {"cassette": FORMAT_VERSION, "model": inner.name}
        self.path.write_text(json.dumps(header) + "\n")

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.inner.complete(request)
        whole = request_to_dict(request)
        line = {"call": call_line(self.previous, whole), "response": response_to_dict(response)}
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")
        self.previous = whole
        return response


class ReplayModel:
    """Answers from a cassette, call by call, after checking each request matches."""

    replay = True
    """The meter records replayed calls at $0 (see cost/meter.py)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        header, lines = _read(self.path)
        self.name = str(header["model"])
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []
        previous: dict[str, Any] | None = None
        for number, line in enumerate(lines, start=2):
            try:
                previous = expand_line(previous, line.get("call", line))
            except (KeyError, TypeError, ValueError) as e:
                raise BadInput(f"{self.path}: line {number} is not a recorded call ({e})") from None
            self.calls.append((previous, line["response"]))
        self.position = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        if self.position >= len(self.calls):
            raise CassetteMismatch(
                f"{self.path}: the run made more calls than the {len(self.calls)} recorded"
            )
        recorded, response = self.calls[self.position]
        difference = first_difference(recorded, request_to_dict(request))
        if difference is not None:
            raise CassetteMismatch(
                f"{self.path}: call {self.position + 1} diverges from the recording at {difference}"
            )
        self.position += 1
        return response_from_dict(response)
