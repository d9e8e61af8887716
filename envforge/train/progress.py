"""A rich progress bar for training: env steps done, steps per second, recent episode return."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from envforge.train.ppo import ProgressFn


@contextmanager
def training_progress(console: Console, description: str, total_steps: int) -> Iterator[ProgressFn]:
    """Yields the callback the trainers call after each chunk of updates."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
        TextColumn("[cyan]{task.fields[sps]}"),
        TextColumn("return {task.fields[ret]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    task = progress.add_task(description, total=total_steps, sps="compiling…", ret="-")

    def update(done: int, total: int, sps: float, recent_return: float) -> None:
        ret = "-" if math.isnan(recent_return) else f"{recent_return:.4g}"
        progress.update(task, completed=done, total=total, sps=f"{sps:,.0f} SPS", ret=ret)

    with progress:
        yield update
