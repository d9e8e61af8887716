"""Local HTTP servers speaking each provider's wire format, for the provider tests.

The adapters under test run their real SDKs (anthropic, google-genai, openai) against a
``FakeServer``; each ``Provider`` knows how its API spells a reply, its usage, an error and a
reply cut by the output limit. Nothing here is a mock of envforge: only the provider is played.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from envforge.agents.messages import (
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    user,
)
from envforge.agents.model import ProviderModel, RetryPolicy

SECRET = "sk-test-SECRET-0123456789"
ROOT = Path(__file__).resolve().parents[1]


# ---- a local server that answers from a queue ---------------------------------------------


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeServer:
    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, Any], dict[str, str]]] = []
        self.responder: (
            Callable[[dict[str, Any]], tuple[int, dict[str, Any], dict[str, str]]] | None
        ) = None
        """Answers a request body when no reply is queued."""
        self.seen: list[Seen] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.seen.append(
                    Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                if server.replies:
                    status, payload, headers = server.replies.pop(0)
                elif server.responder is not None:
                    status, payload, headers = server.responder(body)
                else:
                    status, payload, headers = (500, {"error": {"message": "no reply queued"}}, {})
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def reply(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self.replies.append((status, payload, headers or {}))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- each provider's wire format ------------------------------------------------------------


@dataclass
class Provider:
    model: str
    configure: Callable[[pytest.MonkeyPatch, str], None]
    ok: Callable[..., dict[str, Any]]
    """(text, [(call id, tool, args)], usage numbers, cut=False) -> response body; ``cut``: the
    output limit stopped the reply (each API's own finish reason)."""
    error: Callable[[int, str], dict[str, Any]]
    usage: dict[str, int]
    """The provider's usage numbers in the ok replies of these tests ..."""
    expected: Usage
    """... and what they mean in envforge terms."""
    bill: Callable[[int, int], dict[str, int]]
    """(input tokens, output tokens) -> the provider's usage numbers, nothing cached."""
    overloaded: int
    """The status code of the provider's overload error."""


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_")):
            monkeypatch.delenv(name)


def _anthropic_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)


def _anthropic_ok(
    text: str, calls: list[tuple[str, str, dict[str, Any]]], u: dict[str, int], cut: bool = False
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": "max_tokens" if cut else "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": u,
    }


def _anthropic_error(status: int, kind: str) -> dict[str, Any]:
    if kind == "auth":  # some APIs echo the key they rejected: it must not reach our messages
        return {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"bad key {SECRET}"},
        }
    types = {
        "auth": "authentication_error",
        "model": "not_found_error",
        "overloaded": "overloaded_error",
        "rate": "rate_limit_error",
        "server": "api_error",
        "context": "invalid_request_error",
    }
    message = "prompt is too long: 210345 tokens > 200000 maximum" if kind == "context" else kind
    return {"type": "error", "error": {"type": types[kind], "message": f"{message} problem"}}


def _gemini_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", url)


def _gemini_ok(
    text: str, calls: list[tuple[str, str, dict[str, Any]]], u: dict[str, int], cut: bool = False
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [
        {"functionCall": {"id": i, "name": n, "args": a}, "thoughtSignature": "c2lnbmF0dXJl"}
        for i, n, a in calls
    ]
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "MAX_TOKENS" if cut else "STOP",
            }
        ],
        "usageMetadata": u,
        "modelVersion": "gemini-2.5-pro",
    }


def _gemini_error(status: int, kind: str) -> dict[str, Any]:
    names = {
        "auth": "PERMISSION_DENIED",
        "model": "NOT_FOUND",
        "overloaded": "UNAVAILABLE",
        "rate": "RESOURCE_EXHAUSTED",
        "server": "INTERNAL",
        "context": "INVALID_ARGUMENT",
    }
    message = f"{kind} problem"
    if kind == "context":
        message = "The input token count (1200000) exceeds the maximum number of tokens allowed"
    return {"error": {"code": status, "message": message, "status": names[kind]}}


def _openai_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")


def _openai_ok(
    text: str, calls: list[tuple[str, str, dict[str, Any]]], u: dict[str, int], cut: bool = False
) -> dict[str, Any]:
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-5",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "length" if cut else "tool_calls" if calls else "stop",
            }
        ],
        "usage": u,
    }


def _openai_error(status: int, kind: str) -> dict[str, Any]:
    codes = {"model": "model_not_found", "context": "context_length_exceeded"}
    message = f"{kind} problem"
    if kind == "context":
        message = "This model's maximum context length is 128000 tokens; you sent 130112"
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "code": codes.get(kind),
        }
    }


PROVIDERS = {
    "anthropic": Provider(
        "claude-sonnet-4-6",
        _anthropic_env,
        _anthropic_ok,
        _anthropic_error,
        {
            "input_tokens": 120,
            "output_tokens": 40,
            "cache_creation_input_tokens": 2000,
            "cache_read_input_tokens": 10000,
        },
        Usage(input_tokens=120, output_tokens=40, cache_read_tokens=10000, cache_write_tokens=2000),
        lambda i, o: {"input_tokens": i, "output_tokens": o},
        529,
    ),
    "gemini": Provider(
        "gemini-2.5-pro",
        _gemini_env,
        _gemini_ok,
        _gemini_error,
        {
            "promptTokenCount": 12120,
            "cachedContentTokenCount": 12000,
            "candidatesTokenCount": 30,
            "thoughtsTokenCount": 10,
            "totalTokenCount": 12160,
        },
        Usage(input_tokens=120, output_tokens=40, cache_read_tokens=12000),
        lambda i, o: {"promptTokenCount": i, "candidatesTokenCount": o, "totalTokenCount": i + o},
        503,
    ),
    "openai": Provider(
        "openai:gpt-5",
        _openai_env,
        _openai_ok,
        _openai_error,
        {
            "prompt_tokens": 12120,
            "completion_tokens": 40,
            "total_tokens": 12160,
            "prompt_tokens_details": {"cached_tokens": 12000},
        },
        Usage(input_tokens=120, output_tokens=40, cache_read_tokens=12000),
        lambda i, o: {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o},
        503,
    ),
}
STATUS = {"auth": 401, "model": 404, "overloaded": 503, "rate": 429, "server": 500}
TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
)
FAST_RETRY = RetryPolicy(attempts=3, initial_delay_s=0.25, multiplier=2.0, jitter=0.0)


def conversation() -> ModelRequest:
    """A request with everything the agent sends: cached prefix, a tool call and its result."""
    return ModelRequest(
        system="You port environments.",
        messages=(
            user("REFERENCE SOURCE", "Port it.", cache_first=True),
            Message(
                "assistant",
                (TextPart("Reading."), ToolCall("call-a", "read_file", {"path": "a.c"})),
            ),
            Message("user", (ToolResult("call-a", "read_file", "int main;"),)),
        ),
        tools=TOOLS,
        max_tokens=1000,
    )


def adapter(name: str, slept: list[float]) -> ProviderModel:
    from envforge.agents.anthropic_model import AnthropicModel
    from envforge.agents.gemini_model import GeminiModel
    from envforge.agents.openai_model import OpenAICompatibleModel

    kind = {"anthropic": AnthropicModel, "gemini": GeminiModel, "openai": OpenAICompatibleModel}[
        name
    ]
    model: ProviderModel = kind(PROVIDERS[name].model, FAST_RETRY, sleep=slept.append)
    return model
