"""Where a translate run stands, for a live view: episode, calls, tokens, dollars, time left and
the latest verdict. The repair loop keeps one ``RunState`` up to date; a view reads it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal

from envforge.agents.messages import Usage


@dataclass
class RunState:
    episode: int = 0
    kind: str = ""
    """translate | repair | optimize"""
    max_episodes: int = 0
    doing: str = "starting"
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    budget_usd: Decimal | None = None
    verdict: str = ""
    """The latest verification: the agent's run_verify or the loop's own, and which."""
    deadline: float | None = None
    """``time.monotonic()`` at which the run's wall-clock limit ends (None: no limit)."""
    started: float = field(default_factory=time.monotonic)
    retry_wait_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    version: int = 0
    """Bumped on every change, so a view can tell a new state from one it has shown."""

    def update(self, **changes: object) -> None:
        with self.lock:
            for name, value in changes.items():
                setattr(self, name, value)
            self.version += 1

    def time_left_s(self, now: float | None = None) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - (time.monotonic() if now is None else now))

    def fields(self, now: float | None = None) -> dict[str, str]:
        """The view's cells, as text."""
        with self.lock:
            u = self.usage
            left = self.time_left_s(now)
            elapsed = (time.monotonic() if now is None else now) - self.started
            budget = "" if self.budget_usd is None else f" of ${self.budget_usd}"
            waited = f" ({_duration(self.retry_wait_s)} on retries)" if self.retry_wait_s else ""
            episode = f"{self.episode}/{self.max_episodes}" if self.max_episodes else "-"
            return {
                "episode": f"{episode} {self.kind}".strip(),
                "calls": str(self.calls),
                "tokens": (
                    f"{_count(u.input_tokens)} in, {_count(u.cache_read_tokens)} cache read, "
                    f"{_count(u.cache_write_tokens + u.cache_write_1h_tokens)} cache write, "
                    f"{_count(u.output_tokens)} out"
                ),
                "cost": f"${self.cost_usd:.4f}{budget}",
                "time": (
                    f"{_duration(elapsed)} elapsed{waited}, "
                    + ("no time limit" if left is None else f"{_duration(left)} left")
                ),
                "verdict": self.verdict or "not verified yet",
                "doing": self.doing,
            }

    def line(self, now: float | None = None) -> str:
        """One plain line (for a log or a pipe)."""
        f = self.fields(now)
        return (
            f"[episode {f['episode']}] {f['doing']} | calls {f['calls']} | tokens {f['tokens']} "
            f"| {f['cost']} | {f['time']} | {f['verdict']}"
        )


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m"
