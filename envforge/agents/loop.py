"""The agent loop: ask the model, run the tools it calls, repeat until it stops or a limit hits.

Same shape as mini-swe-agent: ``run`` loops over ``step``; small exceptions end the episode
(the model submitted, a limit was reached, the budget cannot cover the next call, the context
is full). The model is usually a MeteredModel, which checks the budget before every call and
prices it after.

What a real model does besides calling tools is handled here, each case bounded:
- a reply the output limit cut (``ModelResponse.cut``) is not executed: its calls get error
  results saying so, and the next call gets more room (up to ``max_tokens_on_cut``); a call the
  provider could not parse (Gemini's MALFORMED_FUNCTION_CALL) is answered the same way;
- a reply without a tool call ends the episode only when the model's last verifier run passed
  with no change since, or after ``talk_reminders`` reminders to either verify or confirm;
- a request the provider finds too long ends the episode (status ``context_full``), not the run;
- a limit that fires after the model's last verifier run passed, with the port's files unchanged
  since (their digests compared), ends the episode as ``verified``: the port was done.
Requests carry a compacted history (``history.compact``), so they stay bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from envforge.agents.history import HistoryLimits, compact
from envforge.agents.messages import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolResult,
)
from envforge.agents.model import ContextOverflow
from envforge.agents.tools import WorkspaceTools
from envforge.errors import BadInput, BudgetExceeded
from envforge.verify.levels import parse_levels

EventFn = Callable[[str], None]
MessageFn = Callable[[Message], None]
EQUIVALENT = "verdict: equivalent"
"""How run_verify's text starts when the port passed the levels it ran (verify_result.j2): the
whole line for L0-L3, ``verdict: equivalent at level 0 only; levels 1-3 not run yet`` for some."""
UNREADABLE_CALL = (
    "The provider could not read your last tool call (finish reason {}), so nothing was run. "
    "Send the call again, with its arguments as a JSON object."
)


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


class ContextFull(AgentStop):
    status = "context_full"


class OutputLimit(AgentStop):
    status = "output_limit"


VERIFIED = "verified"
"""The status of an episode that a limit ended after a passing run_verify with no change since."""


@dataclass(frozen=True)
class AgentLimits:
    max_steps: int = 40
    """Model calls per episode."""
    max_wall_s: float | None = None
    """Seconds per episode; None: no limit of its own (the run's ``--max-minutes`` bounds it)."""
    max_tokens: int = 16000
    """Output tokens per call (also what the budget check assumes a call may produce)."""
    max_tokens_on_cut: int = 32000
    """After a reply cut at the output limit, the next call may produce up to twice as many
    tokens, but no more than this."""
    cut_replies: int = 3
    """Cut replies in a row that end the episode (status ``output_limit``)."""
    talk_reminders: int = 1
    """Replies without a tool call answered with a reminder before one ends the episode."""
    history: HistoryLimits = field(default_factory=HistoryLimits)


@dataclass
class AgentResult:
    status: str
    """submitted | verified | step_limit | time_limit | budget | context_full | output_limit"""
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
        on_message: MessageFn | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.tools = tools
        self.limits = limits or AgentLimits()
        self.on_event = on_event or (lambda _: None)
        self.on_message = on_message or (lambda _: None)
        """Called with every message as it joins the conversation (transcripts append here)."""
        self.clock = clock
        self.system = ""
        self.messages: list[Message] = []
        self.steps = 0
        self.started = 0.0
        self.max_tokens = self.limits.max_tokens
        self.cuts = self.reminders = 0
        self.verified = False
        """The model's last run_verify passed every level of the job (``tools.levels``): a pass
        at level 0 alone is not done. Done only while the port is as it was then (``done``)."""
        self.passed_only: str | None = None
        """The levels the last run_verify passed when they were not all the job's."""
        self.verified_port: str | None = None
        """The digest of the port's files when the last run_verify ran."""

    def run(self, system: str, first: Message) -> AgentResult:
        """One episode from a system prompt and a first user message."""
        self.system, self.messages, self.steps = system, [], 0
        self.max_tokens, self.cuts, self.reminders = self.limits.max_tokens, 0, 0
        self.verified, self.passed_only, self.verified_port = False, None, None
        self.add(first)
        self.started = self.clock()
        while True:
            try:
                self.step()
            except AgentStop as stop:
                status, message = stop.status, str(stop)
                if not isinstance(stop, Submitted) and self.done():
                    status = VERIFIED
                    message = (
                        f"{stop.status} ({message}) after run_verify passed levels "
                        f"{self.tools.levels} "
                        "with no change to the port since"
                    )
                return AgentResult(status, message, self.steps, self.messages)

    def unchanged(self) -> bool:
        """The port's files are as they were at the last run_verify (a tool that ran is no
        change: only what it did to the files is)."""
        return self.verified_port is not None and self.tools.port_digest() == self.verified_port

    def done(self) -> bool:
        return self.verified and self.unchanged()

    def add(self, message: Message) -> None:
        self.messages.append(message)
        self.on_message(message)

    def step(self) -> None:
        self.check_limits()
        response = self.query()
        reply = response.as_message()
        if reply.parts:  # the APIs refuse an empty assistant turn (a reply with nothing in it)
            self.add(reply)
        if response.cut:
            self.cut(response)
            return
        self.cuts, self.max_tokens = 0, self.limits.max_tokens
        if response.unreadable_call:  # Gemini's malformed JSON: say so, as for the others
            self.add(Message("user", (TextPart(UNREADABLE_CALL.format(response.stop_reason)),)))
            return
        if not response.tool_calls:
            self.talk(response)
            return
        results = []
        for call in response.tool_calls:
            self.on_event(f"step {self.steps}: {call.name} {_brief(call.arguments)}")
            result = self.tools.execute(call)
            if call.name == "run_verify" and not result.is_error:
                self.judge_verify(str(call.arguments.get("levels") or self.tools.levels), result)
            results.append(result)
        self.add(Message("user", tuple(results)))

    def cut(self, response: ModelResponse) -> None:
        """The output limit cut the reply: run none of it, say so, give the next call more room."""
        self.cuts += 1
        if self.cuts >= self.limits.cut_replies:
            raise OutputLimit(
                f"{self.cuts} replies in a row cut at {self.max_tokens} output tokens"
            )
        cut_at = self.max_tokens
        self.max_tokens = max(cut_at, min(2 * cut_at, self.limits.max_tokens_on_cut))
        note = (
            f"Your reply was cut at the output limit ({cut_at} tokens) and was not acted on"
            f"{': its tool calls were not run' if response.tool_calls else ''}. The next reply "
            f"may be up to {self.max_tokens} tokens. Keep replies shorter: write a long file in "
            "parts (write_file with the first part, then edit_file to add the rest)."
        )
        parts: list[TextPart | ToolResult] = [
            ToolResult(
                c.id, c.name, "not run: the reply was cut before this call was complete", True
            )
            for c in response.tool_calls
        ]
        parts.append(TextPart(note))
        self.add(Message("user", tuple(parts)))

    def judge_verify(self, levels: str, result: ToolResult) -> None:
        """Done only when run_verify passed at every level the job asks for (``tools.levels``);
        a pass at some of them is remembered, so the reminder can say what remains."""
        passed = result.content.startswith(EQUIVALENT)
        try:
            complete = set(parse_levels(self.tools.levels)) <= set(parse_levels(levels))
        except BadInput:
            complete = False
        self.verified = passed and complete
        self.passed_only = levels if passed and not complete else None
        self.verified_port = self.tools.port_digest()

    def talk(self, response: ModelResponse) -> None:
        """A reply without a tool call: done after a passing verify, else remind (bounded)."""
        if self.done() or self.reminders >= self.limits.talk_reminders:
            raise Submitted(response.text)
        self.reminders += 1
        if self.passed_only is not None and self.unchanged():
            why = (
                f"your last run_verify passed levels {self.passed_only} only, and the port is "
                f'done when it passes levels {self.tools.levels}. Continue with run_verify at "'
                f'{self.tools.levels}"'
            )
        else:
            why = (
                "your latest changes have not passed run_verify. Continue with a tool call "
                "(run_verify, or a fix)"
            )
        note = (
            f"You replied without a tool call. The port is judged by the verifier after you "
            f"stop, and {why}; if you are finished anyway, reply once more with only your summary."
        )
        self.add(Message("user", (TextPart(note),)))

    def check_limits(self) -> None:
        if self.steps >= self.limits.max_steps:
            raise StepLimitReached(f"{self.steps} model calls (limit {self.limits.max_steps})")
        limit = self.limits.max_wall_s
        elapsed = self.clock() - self.started
        if limit is not None and elapsed >= limit:
            raise TimeLimitReached(f"{elapsed:.0f}s (limit {limit:.0f}s)")

    def request(self) -> ModelRequest:
        return ModelRequest(
            system=self.system,
            messages=compact(self.messages, self.limits.history),
            tools=self.tools.specs,
            max_tokens=self.max_tokens,
        )

    def query(self) -> ModelResponse:
        try:
            response = self.model.complete(self.request())
        except BudgetExceeded as e:
            raise OutOfBudget(str(e)) from e
        except ContextOverflow as e:
            raise ContextFull(str(e)) from e
        self.steps += 1
        return response


def _brief(arguments: dict[str, object], limit: int = 60) -> str:
    parts = []
    for key, value in arguments.items():
        text = " ".join(str(value).split())
        parts.append(f"{key}={text[:limit]}{'...' if len(text) > limit else ''}")
    return " ".join(parts)
