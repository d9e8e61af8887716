"""How large do an agent episode's requests grow, and what does the episode cost at list prices?

    .venv/bin/python benchmarks/agent_context.py [--json]

A scripted 40-call translate episode on pong, driven through the real agent loop and workspace
tools with the default limits: the model lists the workspace, reads the reference and a large
generated file (twice), writes the port, then alternates reads, edits, commands and verifier
runs, and ends with a verified run and a summary. Every request the loop sends is rendered as
the Anthropic Messages API body (``wire_request``) and measured in bytes.

Tokens are estimated at 4 characters per token (no tokenizer is installed). Costs use
envforge/cost/prices.toml for ``claude-sonnet-4-6``:

    uncached    every request's input at the input rate, plus the replies at the output rate
    cached      Anthropic prompt caching as envforge marks it: the part of a request equal to
                the previous request (when the previous request is a prefix of this one) or
                else the stable prefix (system, tools, reference context) is a cache read; the
                rest is a cache write

The script uses only interfaces that existed before the context bounds were added, so the same
file measures both versions (run it with PYTHONPATH pointing at either checkout).
"""

from __future__ import annotations

import json
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from envforge.agents.anthropic_model import wire_request
from envforge.agents.loop import Agent, AgentLimits
from envforge.agents.scripted import ScriptedModel, reply
from envforge.agents.tools import WorkspaceTools
from envforge.cost.prices import load_price_table
from envforge.agents.messages import ModelRequest, user
from envforge.prompts.render import translation_prompt
from envforge.spec import spec_for_name

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4-6"
CHARS_PER_TOKEN = 4
MILLION = Decimal(1_000_000)
CALLS = 40

FINDING = (
    """verdict: not equivalent
L0 contract: pass — builds; API, shapes, dtypes and bounds hold
L1 properties: fail — ball_x differs after one step

### L1 properties: step_mismatch

ball_x differs after one step from a drawn state

Fields that differ: ball_x, ball_vx
Reset seed: 7
Differing step: 0
State before the step:
"""
    + "".join(f"  field_{i} = {i * 3.25}\n" for i in range(24))
    + """
Expected (reference) vs actual (port):
  ball_x: expected 312.5, got 313.0 (abs error 0.5)
  ball_vx: expected -4.0, got 4.0 (abs error 8.0)
Reference lines that assign these fields:
  reference/pong.c:88: s->ball_x += s->ball_vx;
  reference/pong.c:91: s->ball_vx = -s->ball_vx;
Port lines that assign these fields:
  port/pong.py:120: ball_x = state.ball_x + state.ball_vx
"""
)
EQUIVALENT = "verdict: equivalent\nL0 contract: pass\nL1 properties: pass\n"


def script(port: str) -> list[Any]:
    """Forty replies: explore, write, then cycles of read, edit, command and verify."""
    steps: list[tuple[str, dict[str, Any]]] = [
        ("list_files", {"path": "."}),
        ("read_file", {"path": "reference/pong.c"}),
        ("read_file", {"path": "reference/build.log"}),
        ("write_file", {"path": "port/pong.py", "content": port}),
        ("run_verify", {"levels": "0"}),
    ]
    cycle: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "port/pong.py"}),
        ("edit_file", {"path": "port/pong.py", "old": "MARK = 0\n", "new": "MARK = 0\n"}),
        ("run_command", {"command": "cat reference/build.log"}),
        ("run_verify", {"levels": "0-1"}),
        ("read_file", {"path": "reference/build.log"}),
    ]
    while len(steps) < CALLS - 2:
        steps.append(cycle[(len(steps) - 5) % len(cycle)])
    steps.append(("run_verify", {"levels": "0-3"}))
    replies: list[Any] = [reply(calls=[step], turn=i) for i, step in enumerate(steps)]
    replies.append(reply("The port verifies at levels 0-3."))
    return replies


def measure(workspace: Path) -> dict[str, Any]:
    spec = spec_for_name("pong")
    prompt = translation_prompt(spec, "jax", "port/pong.py", "0-3", "reference/")
    reference = workspace / "reference"
    reference.mkdir(parents=True)
    (reference / "pong.c").write_text((ROOT / "references/pong/pong.c").read_text())
    # a long file the agent may read or print (a build log, a vendored header): 150 KB
    (reference / "build.log").write_text(
        "".join(f"[{i:05d}] compiling unit {i}: ok, 0 warnings\n" for i in range(4000))
    )
    port = (ROOT / "generated/pong/jax/pong.py").read_text() + "\nMARK = 0\n"

    def verify(levels: str) -> str:
        return EQUIVALENT if levels == "0-3" else FINDING

    model = ScriptedModel(script(port), name=MODEL)
    tools = WorkspaceTools(workspace, verify=verify)
    result = Agent(model, tools, AgentLimits()).run(
        prompt.system, user(prompt.context, prompt.task, cache_first=True)
    )
    sizes = [len(json.dumps(wire_request(MODEL, r))) for r in model.requests]
    replies = [_reply_chars(m) for m in result.messages if m.role == "assistant"]
    return {
        "status": result.status,
        "calls": len(model.requests),
        "request_bytes": sizes,
        "largest_request_bytes": max(sizes),
        "total_request_bytes": sum(sizes),
        "cost": _costs(model.requests, replies),
    }


def _reply_chars(message: Any) -> int:
    return len(message.text) + sum(len(json.dumps(c.arguments)) for c in message.tool_calls)


def _costs(requests: list[ModelRequest], reply_chars: list[int]) -> dict[str, str]:
    price = load_price_table().price_for(MODEL)
    out_tokens = sum(c // CHARS_PER_TOKEN for c in reply_chars)
    output = out_tokens * price.output / MILLION
    uncached = Decimal(0)
    cached = Decimal(0)
    previous: ModelRequest | None = None
    for request in requests:
        whole = _chars(request, len(request.messages))
        uncached += whole // CHARS_PER_TOKEN * price.input / MILLION
        if previous is not None and request.messages[: len(previous.messages)] == (
            previous.messages
        ):
            hit = _chars(previous, len(previous.messages))
        else:
            hit = _stable_prefix_chars(request)
        written = whole - hit
        cached += (hit * price.cache_read + written * price.cache_write) / CHARS_PER_TOKEN / MILLION
        previous = request
    return {
        "uncached_usd": f"{uncached + output:.4f}",
        "cached_usd": f"{cached + output:.4f}",
        "output_tokens": str(out_tokens),
    }


def _chars(request: ModelRequest, messages: int) -> int:
    cut = ModelRequest(request.system, request.messages[:messages], request.tools)
    return len(json.dumps(wire_request(MODEL, cut)))


def _stable_prefix_chars(request: ModelRequest) -> int:
    first = request.messages[0]
    head = ModelRequest(request.system, (type(first)("user", first.parts[:1]),), request.tools)
    return len(json.dumps(wire_request(MODEL, head)))


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        numbers = measure(Path(folder) / "ws")
    if "--json" in argv:
        print(json.dumps(numbers, indent=2))
        return
    sizes = numbers["request_bytes"]
    print(f"status {numbers['status']}, {numbers['calls']} calls")
    print("request KB per call:", " ".join(f"{s / 1000:.0f}" for s in sizes))
    print(f"largest request {numbers['largest_request_bytes'] / 1000:.1f} KB")
    print(f"all requests {numbers['total_request_bytes'] / 1e6:.2f} MB")
    cost = numbers["cost"]
    print(
        f"cost at {MODEL} list prices: ${cost['uncached_usd']} uncached, "
        f"${cost['cached_usd']} with prompt caching ({cost['output_tokens']} output tokens)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
