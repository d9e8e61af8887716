"""What of an episode's history the model is sent: old tool output elided, so requests stay bounded.

The agent keeps the whole conversation (the transcript has it all); each request is built from a
compacted view. The newest tool-result turns go whole; older ones become a one-line note saying
what was there and that the tool can be called again, and the long arguments of the tool calls
that produced them (a whole file sent with ``write_file``) are elided the same way. This is the
idea of SWE-agent's "last N observations" history processor: the model needs the latest output
in full, and only the gist of what it saw twenty steps ago.

Elision moves in strides: results are elided ``stride`` at a time, so between two moves every
request extends the previous one and the provider's prompt cache keeps serving the prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from envforge.agents.messages import Message, Part, TextPart, ToolCall, ToolResult


@dataclass(frozen=True)
class HistoryLimits:
    keep_results: int = 4
    """Tool-result turns always sent whole (the newest ones)."""
    stride: int = 4
    """Older turns are elided this many at a time (so between 4 and 7 are whole by default)."""
    elide_over_chars: int = 400
    """Results and call arguments at most this long are kept even when old: a note is no shorter."""


def compact(messages: list[Message], limits: HistoryLimits | None = None) -> tuple[Message, ...]:
    """The messages to send: the first (task) message as is, old tool output elided."""
    limits = limits or HistoryLimits()
    turns = [i for i, m in enumerate(messages) if i > 0 and m.tool_results]
    old = max(0, len(turns) - limits.keep_results)
    elided = old // max(1, limits.stride) * max(1, limits.stride)
    if elided == 0:
        return tuple(messages)
    boundary = turns[elided - 1]
    return tuple(
        _elide(m, limits.elide_over_chars) if 0 < i <= boundary else m
        for i, m in enumerate(messages)
    )


def _elide(message: Message, over: int) -> Message:
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, ToolResult) and len(part.content) > over:
            parts.append(replace(part, content=_note(part.name, "output", part.content)))
        elif isinstance(part, ToolCall):
            arguments = {
                k: _note(part.name, f"argument {k!r}", v)
                if isinstance(v, str) and len(v) > over
                else v
                for k, v in part.arguments.items()
            }
            parts.append(replace(part, arguments=arguments))
        elif isinstance(part, TextPart) and message.role == "assistant" and len(part.text) > over:
            parts.append(replace(part, text=part.text[:over] + " [... rest elided]"))
        else:
            parts.append(part)
    return Message(message.role, tuple(parts))


def _note(tool: str, what: str, text: str) -> str:
    lines = text.count("\n") + 1
    return (
        f"[{tool} {what} elided to keep the context small: {len(text)} characters, "
        f"{lines} lines; call the tool again if you need it]"
    )
