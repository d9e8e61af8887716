"""The played model: a local Messages API server answered from a queue folder, driven by the
real Anthropic SDK; `translate` run unchanged against it, recorded, and replayed."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from wire import ROOT, _clear

from envforge.agents.messages import Message, ModelRequest, ToolResult, ToolSpec, user
from envforge.agents.played import PlayedQueue, PlayedServer
from envforge.agents.played_usage import CHARS_PER_TOKEN

pytest.importorskip("anthropic")
Player = Callable[[int, dict[str, Any]], dict[str, Any]]
"""(request number, request body) -> the reply to write."""


class Playing:
    """A program playing the model: answers each request file with ``player``'s reply."""

    def __init__(self, queue: Path, player: Player) -> None:
        self.queue, self.player = queue, player
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        number = 1
        while not self.stop.is_set():
            request = self.queue / f"{number:04d}.request.json"
            if not request.is_file():
                time.sleep(0.05)
                continue
            reply = self.player(number, json.loads(request.read_text()))
            part = self.queue / f".{number:04d}.reply"
            part.write_text(json.dumps(reply))
            part.rename(self.queue / f"{number:04d}.reply.json")
            number += 1


@pytest.fixture
def played(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PlayedServer]:
    _clear(monkeypatch)
    server = PlayedServer(PlayedQueue(tmp_path / "queue"), hold_s=0.5, keepalive_s=0.2).start()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "played-model-no-key")
    yield server
    server.close()


TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
)


def test_replies_become_sdk_responses_with_usage_counted_as_the_cache_would(
    played: PlayedServer, tmp_path: Path
) -> None:
    from envforge.agents.anthropic_model import AnthropicModel

    queue = tmp_path / "queue"

    def player(number: int, body: dict[str, Any]) -> dict[str, Any]:
        if number == 1:
            return {
                "content": [{"type": "tool_use", "name": "read_file", "input": {"path": "a.c"}}]
            }
        return {"content": [{"type": "text", "text": "x" * 400}]}  # 100 tokens out

    playing = Playing(queue, player)
    model = AnthropicModel("claude-sonnet-4-6")
    reference = "r" * (CHARS_PER_TOKEN * 3000)  # past the shortest prefix the API caches
    first = ModelRequest(
        "You port environments.", (user(reference, "Port it.", cache_first=True),), TOOLS, 1000
    )
    one = model.complete(first)
    (call,) = one.tool_calls
    assert (call.name, call.arguments, one.stop_reason) == (
        "read_file",
        {"path": "a.c"},
        "tool_use",
    )
    second = ModelRequest(
        first.system,
        (
            *first.messages,
            Message("assistant", (call,)),
            Message("user", (ToolResult(call.id, call.name, "int main;"),)),
        ),
        TOOLS,
        1000,
    )
    two = model.complete(second)
    playing.stop.set()
    assert (two.text, two.stop_reason, two.usage.output_tokens) == ("x" * 400, "end_turn", 100)
    # the first request wrote its system prompt and reference (1-hour breakpoints) and the
    # task (the newest turn, 5 minutes); the second reads all that back and writes its new turns
    u1, u2 = one.usage, two.usage
    assert u1.cache_read_tokens == 0 and u1.cache_write_1h_tokens >= 3000
    assert u2.cache_read_tokens == u1.cache_write_tokens + u1.cache_write_1h_tokens
    assert 0 < u2.cache_write_tokens < 50 and u2.cache_write_1h_tokens == 0
    response = json.loads((queue / "0002.response.json").read_text())
    assert response["usage"]["cache_read_input_tokens"] == u2.cache_read_tokens
    new = (queue / "0002.new.txt").read_text()
    assert "(messages 1-1 are as in the request before)" in new and "int main;" in new
    assert "=== system ===" in (queue / "0001.new.txt").read_text()


def test_a_slow_reply_keeps_the_connection_and_a_bad_one_is_sent_back(
    played: PlayedServer, tmp_path: Path
) -> None:
    """Past --hold-s the server commits to success and keeps the SDK reading with spaces; a
    reply it cannot use is renamed and explained, and a corrected one goes through."""
    from envforge.agents.anthropic_model import AnthropicModel

    queue = tmp_path / "queue"

    def slow_player() -> None:
        while not (queue / "0001.request.json").is_file():
            time.sleep(0.05)
        time.sleep(1.0)
        (queue / "0001.reply.json").write_text('{"content": [{"type": "tool_use", "name": "x"}]}')
        while not (queue / "0001.problem.txt").is_file():
            time.sleep(0.05)
        (queue / "0001.reply.json").write_text(
            json.dumps(
                {
                    "content": [{"type": "text", "text": "ok"}],
                    "usage": {"input_tokens": 7, "output_tokens": 3},
                }
            )
        )

    threading.Thread(target=slow_player, daemon=True).start()
    request = ModelRequest("s", (user("hi"),), TOOLS, 100)
    response = AnthropicModel("claude-sonnet-4-6").complete(request)
    assert response.text == "ok"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 3)  # as given
    assert "content[0] must be" in (queue / "0001.problem.txt").read_text()
    assert (queue / "0001.reply.rejected-1.json").is_file()


def test_a_played_error_is_a_provider_error_the_adapter_retries(
    played: PlayedServer, tmp_path: Path
) -> None:
    from envforge.agents.anthropic_model import AnthropicModel
    from envforge.agents.model import RetryPolicy, retry_wait_s

    def player(number: int, body: dict[str, Any]) -> dict[str, Any]:
        if number == 1:
            return {
                "error": {
                    "status": 529,
                    "type": "overloaded_error",
                    "message": "busy",
                    "retry_after": 0.1,
                }
            }
        return {"content": [{"type": "text", "text": "back"}]}

    playing = Playing(tmp_path / "queue", player)
    slept: list[float] = []
    model = AnthropicModel("claude-sonnet-4-6", RetryPolicy(attempts=2), sleep=slept.append)
    response = model.complete(ModelRequest("s", (user("hi"),), TOOLS, 100))
    playing.stop.set()
    assert response.text == "back" and slept == [0.1] and retry_wait_s(model) == 0.1


def _played_translate(
    tmp_path: Path, script: list[list[dict[str, Any]]], levels: str, code: int
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """`translate` against the played server with ``--record``, then replayed from the
    cassette; the two outcomes and the request bodies the player got."""
    from typer.testing import CliRunner

    from envforge.cli import app

    seen: list[dict[str, Any]] = []

    def player(number: int, body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"content": script[number - 1]}

    playing = Playing(tmp_path / "queue", player)
    cassette = tmp_path / "played.jsonl"

    def translate(model: str, name: str, *extra: str) -> dict[str, Any]:
        args = ["translate", "--ref", str(ROOT / "references/pong/pong.c"), "--model", model,
                "--levels", levels, "--scale", "0.01", "--max-iters", "1", "--max-steps", "6",
                "--max-tokens", "4000", "--json", "--out", str(tmp_path / name / "out"),
                "--workspace", str(tmp_path / name / "ws"),
                "--ledger", str(tmp_path / name / "ledger.sqlite"), *extra]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == code, result.output
        return dict(json.loads(result.stdout))

    live = translate("claude-sonnet-4-6", "live", "--record", str(cassette))
    playing.stop.set()
    replayed = translate(f"replay:{cassette}", "replay")
    assert len(seen) == len(script) and replayed["model"] == "claude-sonnet-4-6"
    assert replayed["iterations"][0]["usage"] == live["iterations"][0]["usage"]
    assert Decimal(live["cost_usd"]) > 0 and Decimal(replayed["cost_usd"]) == 0
    usage = live["iterations"][0]["usage"]
    queue = tmp_path / "queue"
    responses = [
        json.loads((queue / f"{n:04d}.response.json").read_text())["usage"]
        for n in range(1, len(script) + 1)
    ]
    assert usage["cache_read"] == sum(r["cache_read_input_tokens"] for r in responses) > 0
    assert usage["output"] == sum(r["output_tokens"] for r in responses)
    return live, replayed, seen


def test_translate_runs_unchanged_against_a_played_model_and_replays_from_its_cassette(
    played: PlayedServer, tmp_path: Path
) -> None:
    """The player looks around and stops without a port: recorded, and replayed the same."""
    script = [
        [{"type": "tool_use", "name": "list_files", "input": {"path": "."}}],
        [
            {
                "type": "tool_use",
                "name": "read_file",
                "input": {"path": "reference/pong.c", "start_line": "1", "end_line": "5"},
            }
        ],
        [{"type": "text", "text": "Stopping here."}],
        [{"type": "text", "text": "Stopping, as I said."}],
    ]
    live, replayed, seen = _played_translate(tmp_path, script, "0", code=1)
    assert live["status"] == replayed["status"] == "iteration_limit"
    read = seen[2]["messages"][-1]["content"][0]  # the SDK's own body: a tool result
    assert read["type"] == "tool_result" and not read["is_error"] and "lines 1-5" in read["content"]


def test_a_cassette_is_re_recorded_against_changed_requests_with_the_same_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt change makes a cassette's replay stop at the first differing request; `play
    serve --answers` asks today's requests and answers them with the recorded replies."""
    from typer.testing import CliRunner

    from envforge.agents.cassette import ReplayModel
    from envforge.cli import app

    calls = [
        [{"type": "tool_use", "name": "list_files", "input": {"path": "."}}],
        [{"type": "text", "text": "Stopping here."}],
        [{"type": "text", "text": "Stopping, as I said."}],
    ]
    _clear(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "played-model-no-key")

    def translate(model: str, name: str, max_tokens: str, *extra: str) -> Any:
        args = ["translate", "--ref", str(ROOT / "references/pong/pong.c"), "--model", model,
                "--levels", "0", "--scale", "0.01", "--max-iters", "1", "--max-tokens", max_tokens,
                "--json", "--out", str(tmp_path / name / "out"), "--workspace",
                str(tmp_path / name / "ws"), "--ledger", str(tmp_path / name / "ledger.sqlite"),
                *extra]  # fmt: skip
        return CliRunner().invoke(app, args)

    def serve(name: str, answers: list[dict[str, Any]] | None = None) -> PlayedServer:
        server = PlayedServer(PlayedQueue(tmp_path / name, answers), hold_s=0.5).start()
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        return server

    first = serve("q1")
    playing = Playing(tmp_path / "q1", lambda n, body: {"content": calls[n - 1]})
    old = tmp_path / "old.jsonl"
    assert translate("claude-sonnet-4-6", "a", "4000", "--record", str(old)).exit_code == 1
    playing.stop.set()
    first.close()
    assert "diverges from the recording" in str(translate(f"replay:{old}", "b", "3000").exception)

    second = serve("q2", [response for _, response in ReplayModel(old).calls])
    new = tmp_path / "new.jsonl"
    again = translate("claude-sonnet-4-6", "c", "3000", "--record", str(new))
    second.close()
    assert again.exit_code == 1 and json.loads(again.stdout)["status"] == "iteration_limit"
    replayed = translate(f"replay:{new}", "d", "3000")
    assert replayed.exit_code == 1 and json.loads(replayed.stdout)["iterations"][0]["calls"] == 3
    assert [c for _, c in ReplayModel(new).calls] == [c for _, c in ReplayModel(old).calls]


@pytest.mark.slow  # two translate runs that verify pong at L0: ~90 s on two busy cores
def test_a_played_port_that_verifies_replays_verified(played: PlayedServer, tmp_path: Path) -> None:
    good = (ROOT / "generated" / "pong" / "jax" / "pong.py").read_text()
    script = [
        [
            {"type": "text", "text": "Writing the port."},
            {
                "type": "tool_use",
                "name": "write_file",
                "input": {"path": "port/pong.py", "content": good},
            },
        ],
        [{"type": "tool_use", "name": "run_verify", "input": {"levels": "0"}}],
        [{"type": "text", "text": "Ported pong; run_verify passed level 0."}],
    ]
    live, replayed, _ = _played_translate(tmp_path, script, "0", code=0)
    assert live["status"] == replayed["status"] == "verified"
    assert [it["agent_status"] for it in replayed["iterations"]] == ["submitted"]


def test_play_serve_runs_a_command_against_itself_and_play_wait_prints_the_next_request(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    queue = tmp_path / "q"
    child = (
        "import os, anthropic\n"
        "client = anthropic.Anthropic(max_retries=0)\n"
        "m = client.messages.create(model='claude-sonnet-4-6', max_tokens=50,"
        " messages=[{'role': 'user', 'content': 'Port pong.'}])\n"
        "print('child got:', m.content[0].text, m.usage.output_tokens)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    served = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envforge.cli",
            "play",
            "serve",
            "--queue",
            str(queue),
            "--",
            sys.executable,
            "-c",
            child,
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        text=True,
        env=env,  # fmt: skip
    )
    waited = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge.cli",
            "play",
            "wait",
            "--queue",
            str(queue),
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,  # fmt: skip
    )
    assert waited.returncode == 0, waited.stderr
    assert "=== request 0001" in waited.stdout and "Port pong." in waited.stdout
    (queue / "0001.reply.json").write_text('{"content": [{"type": "text", "text": "On it."}]}')
    out, _ = served.communicate(timeout=60)
    assert served.returncode == 0
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:" in out and "child got: On it. 2" in out
    none = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge.cli",
            "play",
            "wait",
            "--queue",
            str(queue),
            "--timeout",
            "0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # fmt: skip
    )
    assert none.returncode == 1 and "no request waiting" in none.stderr


def test_new_txt_cuts_the_players_own_long_arguments() -> None:
    from envforge.agents.played_render import render_block

    shown = render_block({"type": "tool_use", "id": "t1", "name": "write_file",
                          "input": {"path": "port/x.py", "content": "x" * 5000}})  # fmt: skip
    assert '"path": "port/x.py"' in shown and "(5000 characters, as sent)" in shown
    assert len(shown) < 500
