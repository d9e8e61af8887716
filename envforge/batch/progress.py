"""Live progress of a running batch: one line per running job and a total, redrawn twice a
second from the gate's board (on stderr, so ``--json`` output stays clean)."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from envforge.batch.gate import Board, Gate
from envforge.untrusted.shown import one_line, shown

REFRESH_S = 0.5


def render_board(board: Board, name: str) -> Group:
    table = Table(show_edge=False, box=None, pad_edge=False)
    for column in ("job", "iter", "level", "cost (USD)", "doing"):
        table.add_column(column, no_wrap=column != "doing", overflow="ellipsis")
    running = [line for line in board.lines.values() if line.state == "running"]
    for line in running:
        level = "-" if line.level is None else f"L{line.level}"
        table.add_row(  # the activity quotes the job's agent and port
            line.name,
            str(line.iteration),
            level,
            f"{line.cost_usd:.4f}",
            shown(one_line(line.activity[:80])),
        )
    states: dict[str, int] = {}
    for line in board.lines.values():
        states[line.state] = states.get(line.state, 0) + 1
    counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    total = Text(
        f"batch {name}: {counts}; spent ${board.spent_usd:.4f} of ${board.total_budget_usd}",
        style="bold",
    )
    return Group(table, total) if running else Group(total)


class LiveProgress:
    """Context manager: shows the board while the batch runs. Off a terminal (CI, a pipe) it
    prints one line whenever a job changes state instead."""

    def __init__(self, gate: Gate, name: str, console: Console) -> None:
        self.gate = gate
        self.name = name
        self.console = console
        self.live_mode = console.is_terminal
        self._seen = {n: line.state for n, line in gate.snapshot().lines.items()}
        self.live = Live(
            self._render(), console=console, refresh_per_second=1 / REFRESH_S, transient=True
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="envforge-progress")

    def _render(self) -> Group:
        return render_board(self.gate.snapshot(), self.name)

    def _loop(self) -> None:
        while not self._stop.wait(REFRESH_S):
            if self.live_mode:
                self.live.update(self._render())
            else:
                self._print_changes()

    def _print_changes(self) -> None:
        for name, line in self.gate.snapshot().lines.items():
            if self._seen.get(name) != line.state:
                self._seen[name] = line.state
                detail = f": {line.activity}" if line.state != "running" and line.activity else ""
                self.console.print(
                    shown(one_line(f"{name}: {line.state} (${line.cost_usd:.4f}){detail}"))
                )

    def __enter__(self) -> LiveProgress:
        if self.live_mode:
            self.live.start()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self.live_mode:
            self.live.stop()
        else:
            self._print_changes()
