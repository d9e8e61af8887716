"""``NNNN.new.txt``: a played model's request, readably, showing only what is new.

A request repeats the whole conversation; whoever plays the model needs what was added since
the request before: the tool results of its last calls, a reminder, or, at the start of an
episode, the system prompt, the tools and the first message. JSON escapes are undone so code
reads as code."""

from __future__ import annotations

import json
from typing import Any

SHOWN_ARGUMENT = 300
"""Characters of a tool call's string argument shown in new.txt (the request holds it whole)."""


def _plain(message: dict[str, Any]) -> Any:
    """A message without its cache markers (they move as the conversation grows)."""
    content = message.get("content")
    if isinstance(content, list):
        content = [
            {k: v for k, v in part.items() if k != "cache_control"}
            if isinstance(part, dict)
            else part
            for part in content
        ]
    return {"role": message.get("role"), "content": content}


def shared_messages(previous: dict[str, Any] | None, body: dict[str, Any]) -> int:
    if previous is None:
        return 0
    old = [_plain(m) for m in previous.get("messages") or []]
    new = [_plain(m) for m in body.get("messages") or []]
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    return same


def render_block(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "tool_use":  # the player's own call: long arguments (a whole file) cut short
        shown = {
            k: v
            if not isinstance(v, str) or len(v) <= SHOWN_ARGUMENT
            else f"{v[:SHOWN_ARGUMENT]}... ({len(v)} characters, as sent)"
            for k, v in dict(part.get("input", {})).items()
        }
        arguments = json.dumps(shown, indent=1, ensure_ascii=False)
        return f"[tool_use {part.get('id')}: {part.get('name')}]\n{arguments}"
    if kind == "tool_result":
        content = part.get("content", "")
        if isinstance(content, list):
            content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        error = " (error)" if part.get("is_error") else ""
        return f"[tool_result for {part.get('tool_use_id')}{error}]\n{content}"
    return json.dumps(part, ensure_ascii=False)


def render_new(number: int, previous: dict[str, Any] | None, body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    same = shared_messages(previous, body)
    lines = [
        f"=== request {number:04d}: model {body.get('model')}, max_tokens {body.get('max_tokens')}, "
        f"{len(messages)} messages ===",
        f"Reply in {number:04d}.reply.json.",
    ]
    fresh = same == 0 or previous is None or previous.get("system") != body.get("system")
    if fresh:
        system = body.get("system")
        if isinstance(system, list):
            system = "\n".join(str(p.get("text", "")) for p in system if isinstance(p, dict))
        lines += ["", "=== system ===", str(system or "")]
        lines += ["", "=== tools ==="]
        for tool in body.get("tools") or []:
            schema = json.dumps(tool.get("input_schema", {}), ensure_ascii=False)
            lines += [f"- {tool.get('name')}: {tool.get('description')}", f"  input: {schema}"]
    else:
        lines += [f"(messages 1-{same} are as in the request before)"]
    for index, message in enumerate(messages[same:], start=same + 1):
        lines += ["", f"=== message {index}: {message.get('role')} ==="]
        content = message.get("content")
        if isinstance(content, str):
            lines.append(content)
            continue
        for part in content or []:
            lines.append(render_block(part))
    return "\n".join(lines) + "\n"
