"""A played model: a local server speaking Anthropic's Messages API whose replies someone writes.

``envforge play serve --queue DIR`` listens on 127.0.0.1; with ``ANTHROPIC_BASE_URL`` pointing
at it, ``envforge translate --model claude-…`` runs unchanged (the real SDK, retries, pricing,
ledger, ``--record``). Each request the SDK sends becomes files in the queue folder:

- ``NNNN.request.json``: the request body as sent (model, max_tokens, system, messages, tools);
- ``NNNN.new.txt``: the same request readably, only what is new since the request before (the
  first request of an episode shows the system prompt, the tools and the whole first message);

and the server waits for ``NNNN.reply.json``, written by a person or a program (write it under
another name and rename it, so it is never read half-written). A reply is a Messages API
message, of which only ``content`` is needed::

    {"content": [{"type": "text", "text": "Reading the reference."},
                 {"type": "tool_use", "name": "read_file", "input": {"path": "reference/pong.c"}}]}

The server fills in the rest: ``id`` (and a ``tool_use`` block's missing id), ``model``,
``stop_reason`` (``tool_use`` when the reply calls a tool, else ``end_turn``; ``max_tokens``
when the reply is longer than the request allowed), and ``usage`` counted as Anthropic would
(``played_usage.py``) unless the reply gives its own. ``{"error": {"status": 529, "type":
"overloaded_error", "message": "..."}}`` plays a provider error instead. A reply the server
cannot use is renamed ``NNNN.reply.rejected-K.json`` with the reason in ``NNNN.problem.txt``,
and the server waits for another. What was sent back is kept as ``NNNN.response.json``.

The SDK gives up on a response after its read timeout (600 s in envforge), so after ``hold_s``
of waiting the server sends the success status and then a space every ``KEEPALIVE_S`` while
the reply is still being written (JSON allows leading white space); an error reply must come
before that.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from envforge.agents.played_render import render_new
from envforge.agents.played_usage import PromptCache, output_tokens
from envforge.untrusted.regular import read_file

REPLY_BYTES = 64 * 2**20
"""Largest reply file read from the queue (a reply holds a port or two)."""

POLL_S = 0.2
KEEPALIVE_S = 15.0
HOLD_S = 480.0
"""Seconds to wait for a reply before committing to a success status (under the SDK's 600 s)."""


class ReplyProblem(Exception):
    """A reply file the server cannot send back; the message tells its writer why."""


def request_path(queue: Path, number: int, kind: str = "request") -> Path:
    return queue / f"{number:04d}.{kind}.json"


def pending(queue: Path) -> int | None:
    """The number of the oldest request without a reply (None: every request has one)."""
    for path in sorted(queue.glob("[0-9][0-9][0-9][0-9].request.json")):
        number = int(path.name[:4])
        if not request_path(queue, number, "reply").exists():
            return number
    return None


def check_reply(data: Any, body: dict[str, Any], number: int) -> dict[str, Any]:
    """The Messages API response for reply ``data`` to request ``body``, or ReplyProblem."""
    if not isinstance(data, dict):
        raise ReplyProblem("a reply is a JSON object with a 'content' list (or an 'error')")
    content = data.get("content")
    if not isinstance(content, list) or not content:
        raise ReplyProblem("'content' must be a non-empty list of text and tool_use blocks")
    blocks = []
    for k, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            blocks.append({"type": "text", "text": block["text"]})
        elif (
            kind == "tool_use"
            and isinstance(block.get("name"), str)
            and isinstance(block.get("input"), dict)
        ):
            call_id = str(block.get("id") or f"toolu_played_{number:04d}_{k}")
            blocks.append(
                {"type": "tool_use", "id": call_id, "name": block["name"], "input": block["input"]}
            )
        else:
            raise ReplyProblem(
                f"content[{k}] must be {{'type': 'text', 'text': '...'}} (non-empty) or "
                "{'type': 'tool_use', 'name': '...', 'input': {...}}"
            )
    usage = data.get("usage")
    if usage is not None and not (
        isinstance(usage, dict)
        and all(isinstance(usage.get(k), int) for k in ("input_tokens", "output_tokens"))
    ):
        raise ReplyProblem("'usage', when given, needs integer input_tokens and output_tokens")
    calls = any(b["type"] == "tool_use" for b in blocks)
    stop = "tool_use" if calls else "end_turn"
    if output_tokens(blocks) > int(body.get("max_tokens") or 0):
        stop = "max_tokens"  # as the API would: the reply did not fit what the request allowed
    return {
        "id": f"msg_played_{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "")),
        "content": blocks,
        "stop_reason": str(data.get("stop_reason") or stop),
        "stop_sequence": None,
        "usage": usage,
    }


def check_error(data: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    error = data["error"]
    if not isinstance(error, dict) or not isinstance(error.get("status"), int):
        raise ReplyProblem(
            "an error reply is {'error': {'status': 529, 'type': ..., 'message': ...}}"
        )
    payload = {
        "type": "error",
        "error": {
            "type": str(error.get("type", "api_error")),
            "message": str(error.get("message", "played error")),
        },
    }
    headers = {}
    if error.get("retry_after") is not None:
        headers["retry-after"] = str(error["retry_after"])
    return int(error["status"]), payload, headers


class PlayedQueue:
    """The queue folder: numbers requests, writes them out, reads the replies back.

    ``answers`` (recorded responses, e.g. a cassette's) reply to the first requests by
    themselves, in order: the same replies asked again by today's prompts (a cassette
    re-recorded after a prompt changed); past the last one, replies come from the folder."""

    def __init__(self, folder: Path, answers: list[dict[str, Any]] | None = None) -> None:
        self.folder = folder
        self.answers = answers or []
        folder.mkdir(parents=True, exist_ok=True)
        taken = [int(p.name[:4]) for p in folder.glob("[0-9][0-9][0-9][0-9].request.json")]
        self.number = max(taken, default=0)
        self.previous: dict[str, Any] | None = None
        self.cache = PromptCache()
        self.lock = threading.Lock()

    def post(self, body: dict[str, Any]) -> int:
        self.number += 1
        n = self.number
        _write(self.folder / f"{n:04d}.new.txt", render_new(n, self.previous, body))
        _write(request_path(self.folder, n), json.dumps(body, indent=1) + "\n")
        self.previous = body
        return n

    def take(
        self, number: int, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """The reply to request ``number`` once its file is there and usable (None: not yet)."""
        path = request_path(self.folder, number, "reply")
        if not path.is_file() and number <= len(self.answers):
            _write(path, json.dumps(answer_reply(self.answers[number - 1])) + "\n")
        if not path.is_file():
            return None
        try:
            data = json.loads(read_file(path, REPLY_BYTES))  # no link followed, no FIFO opened
            if isinstance(data, dict) and "error" in data:
                answer = check_error(data)
            else:
                message = check_reply(data, body, number)
                if message["usage"] is None:
                    message["usage"] = self.cache.usage(body, message["content"])
                answer = (200, message, {})
        except (json.JSONDecodeError, UnicodeDecodeError, ReplyProblem, OSError) as e:
            self.reject(number, path, str(e))
            return None
        _write(
            request_path(self.folder, number, "response"), json.dumps(answer[1], indent=1) + "\n"
        )
        return answer

    def reject(self, number: int, path: Path, why: str) -> None:
        k = 1
        while request_path(self.folder, number, f"reply.rejected-{k}").exists():
            k += 1
        os.replace(path, request_path(self.folder, number, f"reply.rejected-{k}"))
        (self.folder / f"{number:04d}.problem.txt").write_text(
            f"{path.name} was not used (renamed to {number:04d}.reply.rejected-{k}.json): {why}\n"
            f"Write a corrected {path.name}.\n"
        )


def answer_reply(response: dict[str, Any]) -> dict[str, Any]:
    """A recorded response (``messages.response_to_dict``) as a reply file; its usage is left
    to the server, since it belonged to the request it answered then."""
    content: list[dict[str, Any]] = []
    if response.get("text"):
        content.append({"type": "text", "text": response["text"]})
    for call in response.get("tool_calls", []):
        content.append(
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["arguments"]}
        )
    return {"content": content}


def _write(path: Path, text: str) -> None:
    """Written under a temporary name and renamed: a reader never sees half a file."""
    temporary = path.with_name(f".{path.name}.part")
    temporary.write_text(text)
    os.replace(temporary, path)


class PlayedServer:
    """The HTTP side: POST /v1/messages, answered from the queue, one request at a time."""

    def __init__(
        self,
        queue: PlayedQueue,
        port: int = 0,
        hold_s: float = HOLD_S,
        keepalive_s: float = KEEPALIVE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queue = queue
        served = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = None
                if not self.path.split("?")[0].endswith("/v1/messages") or not isinstance(
                    body, dict
                ):
                    self._send(404, {"type": "error", "error": {"type": "not_found_error",
                                                                "message": "POST /v1/messages only"}})  # fmt: skip
                    return
                with served.queue.lock:
                    number = served.queue.post(body)
                    served.answer(self, number, body, hold_s, keepalive_s, clock)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def answer(
        self,
        handler: BaseHTTPRequestHandler,
        number: int,
        body: dict[str, Any],
        hold_s: float,
        keepalive_s: float,
        clock: Callable[[], float],
    ) -> None:
        started = clock()
        committed = False
        last_beat = started
        while True:
            answer = self.queue.take(number, body)
            if answer is not None:
                break
            now = clock()
            if not committed and now - started >= hold_s:
                committed = True
                handler.send_response(200)
                handler.send_header("content-type", "application/json")
                handler.send_header("transfer-encoding", "chunked")
                handler.end_headers()
            if committed and now - last_beat >= keepalive_s:
                _chunk(handler, b" ")
                last_beat = now
            time.sleep(POLL_S)
        status, payload, headers = answer
        data = json.dumps(payload).encode()
        if committed:
            if status != 200:  # too late for an error status: say so where the writer looks
                data = json.dumps({"type": "error", "error": {"type": "api_error", "message": "played error came after the success status was sent"}}).encode()  # fmt: skip
            _chunk(handler, data)
            _chunk(handler, b"")
            return
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)

    def start(self) -> PlayedServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()
