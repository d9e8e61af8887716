"""What real models do, through each real SDK against a local server speaking its wire format:
a context overflow, a tool call cut by the output limit, malformed tool arguments, a tool that
raises, a reply without a tool call, an overload that lasts minutes, and a long episode under a
budget. Each ends the documented way (docs/TRANSLATE.md), every billed call is in the ledger
exactly as the server billed it, and no run spends past its budget."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from wire import PROVIDERS, FakeServer, Provider

from envforge.agents.loop import Agent, AgentLimits, AgentResult
from envforge.agents.messages import ModelRequest, ModelResponse, Usage, user
from envforge.agents.model import ModelError, ProviderModel, RetryPolicy
from envforge.agents.tools import WorkspaceTools
from envforge.cost.budget import Budget, worst_case_cost
from envforge.cost.ledger import Ledger
from envforge.cost.meter import MeteredModel
from envforge.cost.prices import Price, load_price_table

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("google.genai")

NO_WAIT = RetryPolicy(attempts=2, initial_delay_s=0.0, jitter=0.0, overload_wait_s=0.0)
BUDGET = Decimal("1")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def live(
    name: str, retry: RetryPolicy = NO_WAIT, slept: list[float] | None = None
) -> ProviderModel:
    from envforge.agents.anthropic_model import AnthropicModel
    from envforge.agents.gemini_model import GeminiModel
    from envforge.agents.openai_model import OpenAICompatibleModel

    kind = {"anthropic": AnthropicModel, "gemini": GeminiModel, "openai": OpenAICompatibleModel}
    sleep = (slept if slept is not None else []).append
    model: ProviderModel = kind[name](PROVIDERS[name].model, retry, sleep=sleep)
    return model


@dataclass
class Billing:
    """The replies a test queues, and what the server billed for each."""

    provider: Provider
    server: FakeServer
    billed: list[Usage] = field(default_factory=list)

    def reply(
        self,
        text: str = "",
        calls: list[tuple[str, str, dict[str, Any]]] | None = None,
        tokens: tuple[int, int] = (1000, 100),
        cut: bool = False,
    ) -> dict[str, Any]:
        body = self.provider.ok(text, calls or [], self.provider.bill(*tokens), cut=cut)
        self.server.reply(200, body)
        self.billed.append(Usage(input_tokens=tokens[0], output_tokens=tokens[1]))
        return body


@dataclass
class Episode:
    result: AgentResult | None
    rows: list[Usage]
    costs: list[Decimal]
    spent: Decimal
    price: Price


def episode(
    name: str,
    workspace: Path,
    budget: Decimal = BUDGET,
    limits: AgentLimits | None = None,
    model: Any = None,
) -> Episode:
    """One agent episode through the provider's SDK, metered into a fresh ledger."""
    price = load_price_table().price_for(PROVIDERS[name].model)
    with Ledger(workspace.parent / f"{workspace.name}.sqlite") as ledger:
        metered = MeteredModel(model or live(name), price, ledger, Budget(budget), "job", "run")
        tools = WorkspaceTools(workspace)
        try:
            result: AgentResult | None = Agent(metered, tools, limits or AgentLimits()).run(
                "You edit files.", user("CONTEXT", "Write a.py", cache_first=True)
            )
        except ModelError:
            result = None
        entries = ledger.entries(job="job")
        spent = ledger.spent(job="job")
    assert spent <= budget
    return Episode(result, [e.usage for e in entries], [e.cost_usd for e in entries], spent, price)


def sent(server: FakeServer, index: int) -> str:
    return json.dumps(server.seen[index].body)


def assert_ledger_is_the_bill(run: Episode, billing: Billing) -> None:
    assert run.rows == billing.billed
    assert run.costs == [run.price.cost(u) for u in billing.billed]


# ---- each behaviour, on each provider --------------------------------------------------------


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_context_overflow_ends_the_episode(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    billing = Billing(p, server)
    billing.reply(calls=[("c1", "write_file", {"path": "a.py", "content": "A = 1\n"})])
    server.reply(400, p.error(400, "context"))
    run = episode(name, tmp_path / "ws")
    assert run.result is not None and run.result.status == "context_full"
    assert len(server.seen) == 2  # not retried: the same request cannot fit later
    assert (tmp_path / "ws" / "a.py").read_text() == "A = 1\n"
    assert_ledger_is_the_bill(run, billing)  # the refused request was not billed


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_tool_call_cut_by_the_output_limit_is_not_run_and_the_retry_has_more_room(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    billing = Billing(p, server)
    billing.reply(
        calls=[("c1", "write_file", {"path": "a.py", "content": "def f(:"})],
        tokens=(1000, 2000),
        cut=True,
    )
    billing.reply(calls=[("c2", "write_file", {"path": "a.py", "content": "A = 1\n"})])
    billing.reply("Done.")
    billing.reply("Done, as I said.")
    limits = AgentLimits(max_tokens=2000, max_tokens_on_cut=3000)
    run = episode(name, tmp_path / "ws", limits=limits)
    assert run.result is not None and run.result.status == "submitted"
    assert (tmp_path / "ws" / "a.py").read_text() == "A = 1\n"  # the cut call never ran
    assert "the reply was cut before this call was complete" in sent(server, 1)
    assert "output limit (2000 tokens)" in sent(server, 1)
    room = [_max_tokens(name, s.body) for s in server.seen]
    assert room == [2000, 3000, 2000, 2000]
    assert_ledger_is_the_bill(run, billing)


def _max_tokens(name: str, body: dict[str, Any]) -> int:
    if name == "gemini":
        return int(body["generationConfig"]["maxOutputTokens"])
    return int(body["max_tokens"])


@pytest.mark.parametrize("name", ["anthropic", "openai"])  # Gemini's args are a JSON object
def test_malformed_tool_arguments_go_back_to_the_model_after_the_call_is_billed(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    billing = Billing(p, server)
    body = billing.reply(calls=[("c1", "write_file", {"path": "a.py"})])
    server.replies.pop()
    broken = '{"path": "a.py", "content": "A = '
    if name == "anthropic":
        body["content"][0]["input"] = broken
    else:
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = broken
    server.reply(200, body)
    billing.reply("Fixed.")
    billing.reply("Fixed, as I said.")
    run = episode(name, tmp_path / "ws")
    assert run.result is not None and run.result.status == "submitted"
    assert "not valid JSON" in sent(server, 1) and "A = " in sent(server, 1)
    assert not (tmp_path / "ws" / "a.py").exists()
    assert_ledger_is_the_bill(run, billing)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_tool_that_raises_answers_with_an_error_result(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    billing = Billing(p, server)
    billing.reply(
        calls=[
            ("c1", "write_file", {"path": "plain", "content": "a file"}),
            ("c2", "write_file", {"path": "plain/child.py", "content": "x"}),
        ]
    )
    billing.reply("Done.")
    billing.reply("Done, as I said.")
    run = episode(name, tmp_path / "ws")
    assert run.result is not None and run.result.status == "submitted"
    second = sent(server, 1)
    assert "plain is a file, not a folder" in second
    assert {"anthropic": '"is_error": true', "openai": "ERROR: ", "gemini": '"error": '}[
        name
    ] in second


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_reply_without_a_tool_call_gets_one_reminder(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    billing = Billing(p, server)
    billing.reply("I will now write the port.")
    billing.reply("Nothing more to do.")
    run = episode(name, tmp_path / "ws")
    assert run.result is not None
    assert (run.result.status, run.result.message) == ("submitted", "Nothing more to do.")
    assert "without a tool call" in sent(server, 1) and len(server.seen) == 2
    assert_ledger_is_the_bill(run, billing)


@pytest.mark.parametrize("name", PROVIDERS)
def test_an_overload_is_waited_out_for_minutes_then_given_up(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    schedule = RetryPolicy(jitter=0.0)  # the defaults: 6 attempts, 2 s doubling to 60 s, 300 s
    overloaded = (p.overloaded, p.error(p.overloaded, "overloaded"), {})

    # eight overloads in a row (past the six attempts a 500 gets), then an answer
    for _ in range(8):
        server.reply(*overloaded)
    billing = Billing(p, server)
    billing.reply("Done.")
    billing.reply("Done, as I said.")
    slept: list[float] = []
    run = episode(name, tmp_path / "a", model=live(name, schedule, slept))
    assert run.result is not None and run.result.status == "submitted"
    assert slept == [2, 4, 8, 16, 32, 60, 60, 60]
    assert_ledger_is_the_bill(run, billing)

    # an overload that does not end: more than a minute of waiting (never slept here), then
    # the episode ends with a model error and nothing billed
    server.responder = lambda body: overloaded
    slept.clear()
    run = episode(name, tmp_path / "b", model=live(name, schedule, slept))
    assert run.result is None and run.rows == []
    assert sum(slept) >= schedule.overload_wait_s > 60 and max(slept) <= schedule.max_delay_s
    assert slept == [2, 4, 8, 16, 32, 60, 60, 60, 60]


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_long_episode_never_spends_past_its_budget(
    name: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server bills one token per two characters of the request body, denser than the
    3 characters per token the old estimate assumed, and every reply uses its whole output
    limit: the most a call can cost."""
    p = PROVIDERS[name]
    p.configure(monkeypatch, server.url)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "log.txt").write_text("".join(f"line {i}: ok\n" for i in range(1200)))
    billing = Billing(p, server)

    def bill_by_size(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        tokens = (math.ceil(len(json.dumps(body)) / 2), 1000)
        turn = len(billing.billed)
        calls = [(f"c{turn}", "read_file", {"path": "log.txt"})]
        billing.billed.append(Usage(input_tokens=tokens[0], output_tokens=tokens[1]))
        return 200, p.ok("", calls, p.bill(*tokens)), {}

    server.responder = bill_by_size
    requests: list[ModelRequest] = []
    budget = Decimal("1")
    run = episode(name, tmp_path / "ws", budget, AgentLimits(max_steps=60, max_tokens=1000),
                  model=Keeping(live(name), requests))  # fmt: skip
    assert run.result is not None and run.result.status == "budget"
    assert len(run.rows) >= 5 and run.spent <= budget
    assert_ledger_is_the_bill(run, billing)
    # the old estimate (3 characters per token, rates without the 1-hour cache it did not use)
    # would have let calls through that cost more than it allowed for
    old_price = replace(run.price, cache_write_1h=None)
    undershot = [
        cost > worst_case_cost(request, old_price)
        for cost, request in zip(run.costs, requests, strict=False)
    ]
    assert any(undershot)


class Keeping:
    """A model that keeps the requests it passes on (to price them the old way afterwards)."""

    def __init__(self, inner: ProviderModel, requests: list[ModelRequest]) -> None:
        self.inner, self.name, self.requests = inner, inner.name, requests

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.inner.complete(request)


def test_a_function_call_gemini_could_not_parse_is_sent_back_as_such(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p = PROVIDERS["gemini"]
    p.configure(monkeypatch, server.url)
    billing = Billing(p, server)
    body = billing.reply()
    body["candidates"][0] = {"finishReason": "MALFORMED_FUNCTION_CALL"}  # no content at all
    billing.reply(calls=[("c1", "write_file", {"path": "a.py", "content": "A = 1\n"})])
    billing.reply("Done.")
    billing.reply("Done, as I said.")
    run = episode("gemini", tmp_path / "ws")
    assert run.result is not None and run.result.status == "submitted"
    assert "could not read your last tool call (finish reason MALFORMED_FUNCTION_CALL)" in sent(
        server, 1
    )
    # the empty reply is not sent back as an empty model turn (the API refuses those)
    roles = [c["role"] for c in server.seen[1].body["contents"]]
    assert roles == ["user", "user"]
    assert (tmp_path / "ws" / "a.py").read_text() == "A = 1\n"
    assert_ledger_is_the_bill(run, billing)
