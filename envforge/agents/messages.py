"""Provider-neutral conversation types: one ModelRequest in, one ModelResponse out, and the
``Model`` interface between them.

Every provider adapter translates these to and from its wire format, and cassettes store them
as JSON, so they hold plain data only (no SDK objects, no credentials). They live outside
``agents/`` because the cost ledger prices the same requests and usages (``cost/`` imports
this module, never ``agents/``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, Protocol

INVALID_ARGUMENTS = "__invalid_json__"
"""Argument key carrying a tool call's raw arguments when the model sent malformed JSON."""
CUT_STOP_REASONS = frozenset({"max_tokens", "length", "MAX_TOKENS"})
"""Finish reasons meaning the output limit cut the reply (Anthropic, OpenAI, Gemini)."""
UNREADABLE_CALL_STOP_REASONS = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
"""Gemini's finish reasons for a function call it could not parse: the reply has no call."""


def arguments_or_invalid(raw: object) -> dict[str, Any]:
    """A tool call's arguments as the SDK parsed them, or the raw text under INVALID_ARGUMENTS
    when they are not a JSON object (the tool then answers with an error, never a crash)."""
    if isinstance(raw, dict):
        return dict(raw)
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {INVALID_ARGUMENTS: raw}
        return value if isinstance(value, dict) else {INVALID_ARGUMENTS: raw}
    return {INVALID_ARGUMENTS: str(raw)}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments (``type: object``)."""


@dataclass(frozen=True)
class TextPart:
    text: str
    cache: bool = False
    """True on the last part of the stable prefix: providers with prompt caching cache up to here."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    signature: str | None = None
    """Opaque provider state that must be sent back with the call (Gemini thought signatures)."""


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    content: str
    is_error: bool = False


Part = TextPart | ToolCall | ToolResult


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    """Tool results travel in user messages; adapters move them where their API wants them."""
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResult))


def user(*texts: str, cache_first: bool = False) -> Message:
    """A user message of text parts; ``cache_first`` marks the first part as the cached prefix."""
    parts = tuple(TextPart(t, cache=cache_first and i == 0) for i, t in enumerate(texts))
    return Message("user", parts)


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 8192
    temperature: float | None = None

    def char_count(self) -> int:
        """Characters the provider will tokenize (used for worst-case budget estimates)."""
        chars = len(self.system)
        for m in self.messages:
            for p in m.parts:
                if isinstance(p, TextPart):
                    chars += len(p.text)
                elif isinstance(p, ToolCall):
                    chars += len(p.name) + len(str(p.arguments))
                else:
                    chars += len(p.content) + len(p.name)
        for t in self.tools:
            chars += len(t.name) + len(t.description) + len(str(t.parameters))
        return chars


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    """Input tokens billed at the plain input rate (cache reads and writes excluded)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache (Anthropic: the 5-minute cache)."""
    cache_write_1h_tokens: int = 0
    """Input tokens written to Anthropic's 1-hour cache (billed at its own rate)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.cache_read_tokens - other.cache_read_tokens,
            self.cache_write_tokens - other.cache_write_tokens,
            self.cache_write_1h_tokens - other.cache_write_1h_tokens,
        )

    @property
    def total_input(self) -> int:
        return (
            self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.cache_write_1h_tokens
        )


@dataclass(frozen=True)
class ModelResponse:
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str
    """The model id the provider reports."""
    stop_reason: str = ""
    cost_usd: Decimal | None = field(default=None, compare=False)
    """Set by the meter once the call is priced and written to the ledger."""

    @property
    def cut(self) -> bool:
        """The output limit cut this reply: its text is partial, its tool calls incomplete."""
        return self.stop_reason in CUT_STOP_REASONS

    @property
    def unreadable_call(self) -> bool:
        """The model tried to call a tool, but the provider could not parse the call."""
        return self.stop_reason in UNREADABLE_CALL_STOP_REASONS and not self.tool_calls

    def as_message(self) -> Message:
        parts: list[Part] = [TextPart(self.text)] if self.text else []
        parts.extend(self.tool_calls)
        return Message("assistant", tuple(parts))


class Model(Protocol):
    name: str
    """The model as the user named it; the price table is keyed by it."""

    def complete(self, request: ModelRequest) -> ModelResponse: ...


# ---- JSON form (cassettes) ----------------------------------------------------------------


def part_to_dict(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text, "cache": part.cache}
    if isinstance(part, ToolCall):
        return {
            "type": "tool_call",
            "id": part.id,
            "name": part.name,
            "arguments": part.arguments,
            "signature": part.signature,
        }
    return {
        "type": "tool_result",
        "call_id": part.call_id,
        "name": part.name,
        "content": part.content,
        "is_error": part.is_error,
    }


def part_from_dict(d: dict[str, Any]) -> Part:
    kind = d["type"]
    if kind == "text":
        return TextPart(d["text"], bool(d.get("cache", False)))
    if kind == "tool_call":
        return ToolCall(d["id"], d["name"], dict(d["arguments"]), d.get("signature"))
    if kind == "tool_result":
        return ToolResult(d["call_id"], d["name"], d["content"], bool(d.get("is_error", False)))
    raise ValueError(f"unknown part type {kind!r}")


def request_to_dict(request: ModelRequest) -> dict[str, Any]:
    return {
        "system": request.system,
        "messages": [
            {"role": m.role, "parts": [part_to_dict(p) for p in m.parts]} for m in request.messages
        ],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools
        ],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }


def request_from_dict(d: dict[str, Any]) -> ModelRequest:
    return ModelRequest(
        system=d["system"],
        messages=tuple(
            Message(m["role"], tuple(part_from_dict(p) for p in m["parts"])) for m in d["messages"]
        ),
        tools=tuple(ToolSpec(t["name"], t["description"], t["parameters"]) for t in d["tools"]),
        max_tokens=int(d["max_tokens"]),
        temperature=d.get("temperature"),
    )


def response_to_dict(response: ModelResponse) -> dict[str, Any]:
    u = response.usage
    return {
        "text": response.text,
        "tool_calls": [part_to_dict(c) for c in response.tool_calls],
        "usage": {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "cache_write_1h_tokens": u.cache_write_1h_tokens,
        },
        "model": response.model,
        "stop_reason": response.stop_reason,
    }


def response_from_dict(d: dict[str, Any]) -> ModelResponse:
    calls = tuple(part_from_dict(c) for c in d["tool_calls"])
    return ModelResponse(
        text=d["text"],
        tool_calls=tuple(c for c in calls if isinstance(c, ToolCall)),
        usage=Usage(**d["usage"]),
        model=d["model"],
        stop_reason=d.get("stop_reason", ""),
    )
