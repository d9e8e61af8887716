"""The agent loop: ask the model, run the tools it calls, repeat until it stops or a limit hits.

Same shape as mini-swe-agent: ``run`` loops over ``step``; small exceptions end the episode
(the model submitted, a limit was reached, the budget cannot cover the next call). The model is
usually a MeteredModel, which checks the budget before every call and prices it after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from envforge.agents.messages import Message, ModelRequest, ModelResponse
from envforge.agents.model import Model
from envforge.agents.tools import WorkspaceTools
from envforge.cost.budget import BudgetExceeded

EventFn = Callable[[str], None]


class AgentStop(Exception):
    """Ends an episode; the class says why."""

    status = "stopped"


class Submitted(AgentStop):
    status = "submitted"


class StepLimitReached(AgentStop):
    status = "step_limit"


class TimeLimitReached(AgentStop):
    status = "time_limit"


class OutOfBudget(AgentStop):
    status = "budget"


@dataclass(frozen=True)
class AgentLimits:
    max_steps: int = 40
    """Model calls per episode."""
    max_wall_s: float = 1800.0
    max_tokens: int = 16000
    """Output tokens per call (also what the budget check assumes a call may produce)."""


@dataclass
class AgentResult:
    status: str
    """submitted | step_limit | time_limit | budget"""
    message: str
    steps: int
    messages: list[Message] = field(default_factory=list)


class Agent:
    def __init__(
        self,
        model: Model,
        tools: WorkspaceTools,
        limits: AgentLimits | None = None,
        on_event: EventFn | None = None,
    ) -> None:
        self.model = model
        self.tools = tools
        self.limits = limits or AgentLimits()
        self.on_event = on_event or (lambda _: None)
        self.system = ""
        self.messages: list[Message] = []
        self.steps = 0
        self.started = 0.0

    def run(self, system: str, first: Message) -> AgentResult:
        """One episode from a system prompt and a first user message."""
        self.system, self.messages, self.steps = system, [first], 0
        self.started = time.monotonic()
        while True:
            try:
                self.step()
            except AgentStop as stop:
                return AgentResult(stop.status, str(stop), self.steps, self.messages)

    def step(self) -> None:
        self.check_limits()
        response = self.query()
        self.messages.append(response.as_message())
        if not response.tool_calls:
            raise Submitted(response.text)
        results = []
        for call in response.tool_calls:
            self.on_event(f"step {self.steps}: {call.name} {_brief(call.arguments)}")
            results.append(self.tools.execute(call))
        self.messages.append(Message("user", tuple(results)))

    def check_limits(self) -> None:
        if self.steps >= self.limits.max_steps:
            raise StepLimitReached(f"{self.steps} model calls (limit {self.limits.max_steps})")
        elapsed = time.monotonic() - self.started
        if elapsed >= self.limits.max_wall_s:
            raise TimeLimitReached(f"{elapsed:.0f}s (limit {self.limits.max_wall_s:.0f}s)")

    def query(self) -> ModelResponse:
        request = ModelRequest(
            system=self.system,
            messages=tuple(self.messages),
            tools=self.tools.specs,
            max_tokens=self.limits.max_tokens,
        )
        try:
            response = self.model.complete(request)
        except BudgetExceeded as e:
            raise OutOfBudget(str(e)) from e
        self.steps += 1
        return response


def _brief(arguments: dict[str, object], limit: int = 60) -> str:
    parts = []
    for key, value in arguments.items():
        text = " ".join(str(value).split())
        parts.append(f"{key}={text[:limit]}{'...' if len(text) > limit else ''}")
    return " ".join(parts)
