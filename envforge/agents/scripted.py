"""A deterministic scripted model: pre-written responses, one per call, for tests and demos.

It is a real Model (the agent cannot tell it from a provider), not a mock. Each script entry is
a response, or a function of the request that returns one (to write files that depend on what
the agent was told, or to check the prompt it got). Every request is kept in ``requests``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from envforge.agents.messages import ModelRequest, ModelResponse, ToolCall, Usage
from envforge.agents.model import ModelError

ScriptEntry = ModelResponse | Callable[[ModelRequest], ModelResponse]


def reply(
    text: str = "",
    calls: Sequence[tuple[str, dict[str, Any]]] = (),
    usage: Usage | None = None,
    turn: int = 0,
) -> ModelResponse:
    """A scripted response: some text and tool calls ``(name, arguments)``."""
    tool_calls = tuple(ToolCall(f"call_{turn}_{i}", n, dict(a)) for i, (n, a) in enumerate(calls))
    return ModelResponse(
        text=text,
        tool_calls=tool_calls,
        usage=usage or Usage(),
        model="scripted",
        stop_reason="tool_use" if tool_calls else "end_turn",
    )


class ScriptedModel:
    def __init__(self, script: Sequence[ScriptEntry], name: str = "scripted") -> None:
        self.name = name
        self.script = list(script)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        if len(self.requests) >= len(self.script):
            raise ModelError(f"scripted model: no response left for call {len(self.requests) + 1}")
        entry = self.script[len(self.requests)]
        self.requests.append(request)
        return entry(request) if callable(entry) else entry
