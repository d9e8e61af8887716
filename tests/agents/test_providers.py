"""Each provider adapter through its real SDK, against a local HTTP server that speaks the
provider's wire format (Messages API, generateContent, chat completions); model selection;
and cassettes recorded from one run replayed with no server at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from wire import (
    FAST_RETRY,
    PROVIDERS,
    ROOT,
    SECRET,
    TOOLS,
    FakeServer,
    _anthropic_error,
    _clear,
    adapter,
    conversation,
)

from envforge.agents.cassette import CassetteMismatch, RecordingModel, ReplayModel
from envforge.agents.loop import Agent, AgentLimits
from envforge.agents.messages import Message, ModelRequest, ToolResult, Usage, user
from envforge.agents.model import ModelAuthError, ModelError, UnknownModel
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


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


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
    # the stable prefix in the 1-hour cache (it outlasts a long verify between episodes), the
    # conversation in the 5-minute one; 1-hour breakpoints come first, as the API requires
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    first, assistant, results = body["messages"]
    assert first["content"][0] == {
        "type": "text",
        "text": "REFERENCE SOURCE",
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
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


def test_one_selector_opens_offline_models_relative_to_a_root(tmp_path: Path) -> None:
    """``translate`` and ``batch`` share ``open_model``: a manifest passes its folder as root."""
    import json

    from envforge.agents.script_file import ScriptFileModel
    from envforge.agents.select import skip_calls

    (tmp_path / "answers.json").write_text(json.dumps({"model": "m", "responses": []}))
    scripted = open_model("scripted:answers.json", root=tmp_path)
    assert isinstance(scripted, ScriptFileModel) and scripted.path == tmp_path / "answers.json"
    assert scripted.name == "m"
    absolute = open_model(f"scripted:{tmp_path / 'answers.json'}", root=Path("/elsewhere"))
    assert isinstance(absolute, ScriptFileModel) and absolute.path == tmp_path / "answers.json"
    skip_calls(scripted, 3)
    assert scripted.position == 3
    with pytest.raises(BadInput, match="model script not found"):
        open_model("scripted:answers.json")  # relative to the working directory: not there


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
    server.reply(200, p.ok("Done, as I said.", [], p.usage))  # after the reminder
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
    assert recorded_cost == 4 * load_price_table().price_for("claude-sonnet-4-6").cost(p.expected)
    assert replayed_cost == 0  # a replay spends nothing: its rows are marked, at $0
    with Ledger(tmp_path / "again.sqlite") as ledger:
        rows = ledger.entries(job="cassette")
    assert [(e.model, e.price_version, e.usage) for e in rows] == [
        ("replay:claude-sonnet-4-6", "replay", p.expected)
    ] * 4
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


def test_cassettes_append_store_new_messages_only_and_show_the_differing_text(
    tmp_path: Path,
) -> None:
    from envforge.agents.scripted import ScriptedModel, reply

    cassette = tmp_path / "run.jsonl"
    long_context = "reference source line\n" * 400

    def record(task: str) -> list[Message]:
        script = [reply(calls=[("list_files", {"path": "."})], turn=i) for i in range(3)]
        script += [reply("Done."), reply("Done.")]
        model = RecordingModel(ScriptedModel(script, name="claude-sonnet-4-6"), cassette)
        result = Agent(model, WorkspaceTools(tmp_path / "ws")).run(
            "system", user(long_context, task, cache_first=True)
        )
        return result.messages

    first = record("Write a.py")
    size_after_one_run = cassette.stat().st_size
    second = record("Write b.py")  # --record appends: both runs are in the file
    lines = cassette.read_text().splitlines()
    assert json.loads(lines[0]) == {"cassette": 2, "model": "claude-sonnet-4-6"}
    assert len(lines) == 1 + 2 * 5
    # each call after a run's first stores only its new messages, not the whole history
    calls = [json.loads(line)["call"] for line in lines[1:]]
    assert [c["keep"] for c in calls[:5]] == [0, 1, 3, 5, 7]
    assert all(long_context not in json.dumps(c) for c in calls[1:5])
    assert "system" not in calls[1] and "tools" not in calls[1]
    assert size_after_one_run < 2 * len(long_context) + 20_000

    replay = ReplayModel(cassette)
    assert replay.name == "claude-sonnet-4-6" and len(replay.calls) == 10
    assert (
        Agent(replay, WorkspaceTools(tmp_path / "again"))
        .run("system", user(long_context, "Write a.py", cache_first=True))
        .messages
        == first
    )
    assert second[0].text.endswith("Write b.py")

    with pytest.raises(CassetteMismatch) as caught:
        Agent(ReplayModel(cassette), WorkspaceTools(tmp_path / "other")).run(
            "system", user(long_context.replace("line\nref", "line\nREF", 1), "Write a.py",
                           cache_first=True)
        )  # fmt: skip
    message = str(caught.value)
    assert "call 1 diverges" in message and "messages[0].parts[0].text" in message
    assert "character 22 (line 2)" in message
    assert "recorded 'reference source line\\nreference" in message
    assert "vs now 'reference source line\\nREFerence" in message

    with pytest.raises(BadInput, match="holds calls of 'claude-sonnet-4-6'"):
        RecordingModel(ScriptedModel([], name="gemini-2.5-pro"), cassette)


def test_version_1_cassettes_still_replay(tmp_path: Path) -> None:
    from envforge.agents.messages import request_to_dict, response_to_dict
    from envforge.agents.scripted import reply

    cassette = tmp_path / "v1.jsonl"
    request = conversation()
    line = {"request": request_to_dict(request), "response": response_to_dict(reply("hi"))}
    cassette.write_text(
        json.dumps({"cassette": 1, "model": "claude-sonnet-4-6"}) + "\n" + json.dumps(line) + "\n"
    )
    assert ReplayModel(cassette).complete(request).text == "hi"


def test_anthropic_one_hour_cache_writes_are_priced_at_their_own_rate(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = PROVIDERS["anthropic"]
    p.configure(monkeypatch, server.url)
    usage = {
        "input_tokens": 50,
        "output_tokens": 10,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
    }
    server.reply(200, p.ok("ok", [], usage))
    response = adapter("anthropic", []).complete(conversation())
    assert response.usage == Usage(50, 10, 0, 1000, 2000)
    price = load_price_table().price_for("claude-sonnet-4-6")
    assert price.cache_write_1h == 2 * price.input
    assert price.cost(response.usage) == (
        50 * price.input + 10 * price.output + 1000 * price.cache_write + 2000 * 2 * price.input
    ) / Decimal(1_000_000)
