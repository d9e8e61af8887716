"""The live view of a translate run: episode, calls, tokens, dollars, time left and the latest
verdict, redrawn in place on a terminal; off a terminal (a pipe, CI, a log file) one plain line
per step of the run (each tool call, each verification), so a log says what happened and when."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from envforge.translate.progress import RunState
from envforge.untrusted.shown import one_line, shown

REFRESH_S = 0.5


def render_state(state: RunState, title: str) -> Table:
    table = Table(title=title, show_header=False, box=None, pad_edge=False, title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="ellipsis")
    for name, value in state.fields().items():  # what it is doing quotes the model's calls
        table.add_row(name, shown(one_line(value)))
    return table


class RunView:
    """Context manager: shows ``state`` while the run goes. ``live`` (default: whether the
    console is a terminal) redraws a table in place; otherwise ``progress`` (the run's progress
    callback) prints a line each time it is called."""

    def __init__(
        self, state: RunState, title: str, console: Console, live: bool | None = None
    ) -> None:
        self.state = state
        self.title = title
        self.console = console
        self.live_mode = console.is_terminal if live is None else live
        self.live = Live(
            render_state(state, title),
            console=console,
            refresh_per_second=1 / REFRESH_S,
            transient=False,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="envforge-view")

    def _loop(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self.live.update(render_state(self.state, self.title))

    def progress(self, message: str) -> None:
        """The run's progress callback: a plain line off a terminal (the state is up to date)."""
        if not self.live_mode:
            self.console.print(shown(one_line(self.state.line())), soft_wrap=True)

    def __enter__(self) -> RunView:
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
        if self.live_mode:
            self._stop.set()
            self._thread.join()
            self.live.update(render_state(self.state, self.title))
            self.live.stop()
