"""Each provider adapter through its real SDK, against a local HTTP server that speaks the
provider's wire format (Messages API, generateContent, chat completions); model selection;
and cassettes recorded from one run replayed with no server at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from envforge.agents.cassette import CassetteMismatch, RecordingModel, ReplayModel
from envforge.agents.loop import Agent, AgentLimits
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
from envforge.agents.model import (
    ModelAuthError,
    ModelError,
    ProviderModel,
    RetryPolicy,
    UnknownModel,
)
from envforge.agents.select import ModelOptions, open_model
from envforge.agents.tools import WorkspaceTools
from envforge.cost.budget import Budget
from envforge.cost.ledger import Ledger
from envforge.cost.meter import MeteredModel
from envforge.cost.prices import load_price_table
from envforge.errors import BadInput

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("google.genai")

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
        self.seen: list[Seen] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.seen.append(
                    Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status, payload, headers = (
                    server.replies.pop(0)
                    if server.replies
                    else (500, {"error": {"message": "no reply queued"}}, {})
                )
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


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


# ---- each provider's wire format ------------------------------------------------------------


@dataclass
class Provider:
    model: str
    configure: Callable[[pytest.MonkeyPatch, str], None]
    ok: Callable[[str, list[tuple[str, str, dict[str, Any]]], dict[str, int]], dict[str, Any]]
    """(text, [(call id, tool, args)], usage numbers) -> response body."""
    error: Callable[[int, str], dict[str, Any]]
    usage: dict[str, int]
    """The provider's usage numbers in the ok replies of these tests ..."""
    expected: Usage
    """... and what they mean in envforge terms."""


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_")):
            monkeypatch.delenv(name)


def _anthropic_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)


def _anthropic_ok(
    text: str, calls: list[tuple[str, str, dict[str, Any]]], u: dict[str, int]
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
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
    }
    return {"type": "error", "error": {"type": types[kind], "message": f"{kind} problem"}}


def _gemini_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", url)


def _gemini_ok(
    text: str, calls: list[tuple[str, str, dict[str, Any]]], u: dict[str, int]
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [
        {"functionCall": {"id": i, "name": n, "args": a}, "thoughtSignature": "c2lnbmF0dXJl"}
        for i, n, a in calls
    ]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
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
    }
    return {"error": {"code": status, "message": f"{kind} problem", "status": names[kind]}}


def _openai_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")


def _openai_ok(
    text: str, calls: list[tuple[str, str, dict[str, Any]]], u: dict[str, int]
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
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": u,
    }


def _openai_error(status: int, kind: str) -> dict[str, Any]:
    codes = {"model": "model_not_found"}
    return {
        "error": {
            "message": f"{kind} problem",
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


# ---- every provider ------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROVIDERS)
def test_text_tool_calls_and_usage_become_an_exact_cost(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    server.reply(200, p.ok("Let me look.", [("call-b", "read_file", {"path": "b.c"})], p.usage))
    response = adapter(name, []).complete(conversation())

    assert response.text == "Let me look."
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("read_file", {"path": "b.c"})]
    assert response.usage == p.expected
    price = load_price_table().price_for(p.model)
    micro = (
        p.expected.input_tokens * price.input
        + p.expected.output_tokens * price.output
        + p.expected.cache_read_tokens * price.cache_read
        + p.expected.cache_write_tokens * price.cache_write
    )
    assert price.cost(response.usage) == micro / Decimal(1_000_000)
    (seen,) = server.seen  # one round: nothing was called automatically
    assert SECRET in json.dumps(seen.headers)  # the key went where the SDK puts it, and only there
    assert SECRET not in json.dumps(seen.body)


@pytest.mark.parametrize("name", PROVIDERS)
def test_rate_limits_and_overload_are_retried_with_backoff(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    server.reply(429, p.error(429, "rate"), {"retry-after": "0.125"})
    server.reply(503, p.error(503, "overloaded"))
    server.reply(200, p.ok("done", [], p.usage))
    slept: list[float] = []
    response = adapter(name, slept).complete(conversation())
    assert response.text == "done"
    assert len(server.seen) == 3
    assert slept == [0.125, 0.5]  # the server's retry-after, then exponential backoff


@pytest.mark.parametrize("name", PROVIDERS)
def test_persistent_server_errors_give_up_after_the_attempts(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    for _ in range(3):
        server.reply(500, p.error(500, "server"))
    with pytest.raises(ModelError, match="gave up after 3 attempts") as caught:
        adapter(name, []).complete(conversation())
    assert len(server.seen) == 3 and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", PROVIDERS)
def test_rejected_key_and_unknown_model_are_one_line_bad_input(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    server.reply(401 if name != "gemini" else 403, p.error(401, "auth"))
    with pytest.raises(ModelAuthError) as auth:
        adapter(name, []).complete(conversation())
    server.reply(404, p.error(404, "model"))
    with pytest.raises(UnknownModel) as unknown:
        adapter(name, []).complete(conversation())
    for error in (auth.value, unknown.value):
        assert isinstance(error, BadInput)
        assert "\n" not in str(error) and SECRET not in str(error)
    assert len(server.seen) == 2  # neither was retried


@pytest.mark.parametrize("name", PROVIDERS)
def test_missing_key_is_refused_before_any_request(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    with pytest.raises(ModelAuthError, match="API key"):
        open_model(PROVIDERS[name].model)


# ---- what each adapter puts on the wire ----------------------------------------------------


def test_anthropic_caches_system_stable_prefix_and_conversation(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS["anthropic"]
    p.configure(monkeypatch, server.url)
    server.reply(200, p.ok("ok", [], p.usage))
    adapter("anthropic", []).complete(conversation())
    body = server.seen[0].body
    assert server.seen[0].path == "/v1/messages"
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    first, assistant, results = body["messages"]
    assert first["content"][0] == {
        "type": "text",
        "text": "REFERENCE SOURCE",
        "cache_control": {"type": "ephemeral"},
    }
    assert "cache_control" not in first["content"][1]
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "call-a",
        "name": "read_file",
        "input": {"path": "a.c"},
    }
    assert (
        results["content"][0]["type"] == "tool_result"
        and results["content"][0]["tool_use_id"] == "call-a"
    )
    assert results["content"][-1]["cache_control"] == {"type": "ephemeral"}  # the newest turn
    assert body["tools"][0]["input_schema"] == TOOLS[0].parameters and body["max_tokens"] == 1000


def test_gemini_sends_function_responses_and_thought_signatures_back(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS["gemini"]
    p.configure(monkeypatch, server.url)
    server.reply(200, p.ok("", [("fc-1", "read_file", {"path": "b.c"})], p.usage))
    server.reply(200, p.ok("done", [], p.usage))
    model = adapter("gemini", [])
    first = model.complete(conversation())
    (call,) = first.tool_calls
    assert call.signature is not None
    follow_up = ModelRequest(
        "s",
        (
            *conversation().messages,
            first.as_message(),
            Message("user", (ToolResult(call.id, "read_file", "text"),)),
        ),
        TOOLS,
    )
    model.complete(follow_up)
    assert server.seen[0].path.endswith("/models/gemini-2.5-pro:generateContent")
    contents = server.seen[1].body["contents"]
    sent_call = contents[3]["parts"][0]
    assert (
        sent_call["functionCall"]["name"] == "read_file"
        and sent_call["thoughtSignature"] == "c2lnbmF0dXJl"
    )
    assert contents[4]["parts"][0]["functionResponse"] == {
        "id": "fc-1",
        "name": "read_file",
        "response": {"output": "text"},
    }
    assert server.seen[0].body["generationConfig"]["maxOutputTokens"] == 1000


def test_openai_compatible_sends_tool_messages_and_local_max_tokens(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS["openai"]
    p.configure(monkeypatch, server.url)
    server.reply(200, p.ok("ok", [], p.usage))
    adapter("openai", []).complete(conversation())
    seen = server.seen[0]
    assert seen.path == "/v1/chat/completions" and seen.body["model"] == "gpt-5"
    system, first, assistant, tool = seen.body["messages"]
    assert system == {"role": "system", "content": "You port environments."}
    assert first == {"role": "user", "content": "REFERENCE SOURCE\n\nPort it."}
    assert assistant["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "a.c"}',
    }
    assert tool == {"role": "tool", "tool_call_id": "call-a", "content": "int main;"}
    assert seen.body["max_tokens"] == 1000  # a local server: max_completion_tokens is OpenAI's own


def test_model_names_select_providers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from envforge.agents.anthropic_model import AnthropicModel
    from envforge.agents.gemini_model import GeminiModel
    from envforge.agents.openai_model import OpenAICompatibleModel

    _clear(monkeypatch)
    for variable in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(variable, SECRET)
    assert isinstance(open_model("claude-haiku-4-5"), AnthropicModel)
    assert isinstance(open_model("gemini-2.5-flash"), GeminiModel)
    assert isinstance(open_model("openai:gpt-5-mini"), OpenAICompatibleModel)
    cassette = tmp_path / "c.jsonl"
    recorded = open_model("claude-haiku-4-5", ModelOptions(record_to=cassette))
    assert isinstance(recorded, RecordingModel) and recorded.name == "claude-haiku-4-5"
    assert isinstance(open_model(f"replay:{cassette}"), ReplayModel)
    for bad in ("gpt-5", "openai:", "llama3"):
        with pytest.raises(UnknownModel):
            open_model(bad)


def test_cli_prints_one_line_and_exits_2_when_the_key_is_rejected(
    server: FakeServer, tmp_path: Path
) -> None:
    server.reply(401, _anthropic_error(401, "auth"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_"))
    }
    env.update(ANTHROPIC_API_KEY=SECRET, ANTHROPIC_BASE_URL=server.url, JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge.cli",
            "translate",
            "--ref",
            str(ROOT / "references/pong/pong.c"),
            "--model",
            "claude-sonnet-4-6",
            "--out",
            str(tmp_path / "out"),
            "--workspace",
            str(tmp_path / "ws"),
            "--ledger",
            str(tmp_path / "ledger.sqlite"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "envforge: error: Anthropic rejected the credentials"
    )
    assert SECRET not in done.stderr + done.stdout


# ---- cassettes ----------------------------------------------------------------------------


def _agent_run(
    model: Any, workspace: Path, ledger_path: Path, task: str = "Write hello.txt"
) -> tuple[list[Message], Decimal]:
    with Ledger(ledger_path) as ledger:
        price = load_price_table().price_for("claude-sonnet-4-6")
        metered = MeteredModel(model, price, ledger, Budget(Decimal("1")), "cassette", "run")
        result = Agent(
            metered, WorkspaceTools(workspace), AgentLimits(max_steps=5, max_tokens=1000)
        ).run("You edit files.", user("CONTEXT", task, cache_first=True))
        assert result.status == "submitted"
        return result.messages, ledger.spent(job="cassette")


def test_a_recorded_cassette_replays_the_same_run_with_no_server(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS["anthropic"]
    p.configure(monkeypatch, server.url)
    server.reply(
        200, p.ok("", [("t1", "write_file", {"path": "hello.txt", "content": "hi\n"})], p.usage)
    )
    server.reply(
        200,
        p.ok(
            "", [("t2", "edit_file", {"path": "hello.txt", "old": "hi", "new": "hello"})], p.usage
        ),
    )
    server.reply(200, p.ok("Done.", [], p.usage))
    cassette = tmp_path / "run.jsonl"
    live = open_model("claude-sonnet-4-6", ModelOptions(retry=FAST_RETRY, record_to=cassette))
    recorded_messages, recorded_cost = _agent_run(live, tmp_path / "live", tmp_path / "live.sqlite")
    server.close()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens here

    replay = open_model(f"replay:{cassette}")
    assert replay.name == "claude-sonnet-4-6"  # priced like the recorded model
    replayed_messages, replayed_cost = _agent_run(
        replay, tmp_path / "again", tmp_path / "again.sqlite"
    )
    assert replayed_messages == recorded_messages
    assert (
        replayed_cost
        == recorded_cost
        == 3 * load_price_table().price_for("claude-sonnet-4-6").cost(p.expected)
    )
    assert (tmp_path / "again" / "hello.txt").read_text() == "hello\n"
    assert SECRET not in cassette.read_text()
    assert SECRET.encode() not in (tmp_path / "live.sqlite").read_bytes()

    with pytest.raises(CassetteMismatch, match="call 1 diverges .*messages\\[0\\]"):
        _agent_run(
            open_model(f"replay:{cassette}"),
            tmp_path / "other",
            tmp_path / "o.sqlite",
            task="Write bye.txt",
        )


def test_replay_fails_loudly_when_the_run_asks_more_than_was_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text(json.dumps({"cassette": 1, "model": "claude-sonnet-4-6"}) + "\n")
    with pytest.raises(CassetteMismatch, match="more calls than the 0 recorded"):
        ReplayModel(cassette).complete(conversation())
    (tmp_path / "bad.jsonl").write_text("not json\n")
    with pytest.raises(BadInput):
        ReplayModel(tmp_path / "bad.jsonl")
