"""Optimize rounds: once a port verifies, ask for speed, and keep a change only if the port
still verifies and measures faster; otherwise put the last verified port back.

Every target: the host times ``Driver.run_steps`` around the port's sandboxed driver
(``translate/throughput.py``). Each round's record says what it gained over the port kept before
it (``kept: 1,234 steps/s, 1.8x iteration 2``) or why it was undone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envforge.prompts import render as prompts
from envforge.translate.throughput import Throughput
from envforge.verify.verdict import Report

if TYPE_CHECKING:
    from envforge.translate.orchestrate import Iteration, RepairLoop


def optimize(loop: RepairLoop, iterations: list[Iteration], report: Report | None) -> Report | None:
    """Run ``loop.config.optimize_rounds`` rounds after iteration ``iterations[-1]`` verified.

    Returns the report of the port that stays (the last verified one)."""
    config = loop.config
    kept = iterations[-1]
    baseline = loop.measurer(loop.spec, loop.ws.port_dir, config.throughput_batch)
    if isinstance(baseline, str):
        loop.progress(f"optimize: skipped, {baseline}")
        return report
    kept.steps_per_second = baseline.steps_per_second
    for _ in range(config.optimize_rounds):
        number = iterations[-1].number + 1
        task = prompts.optimize_task(
            loop.ws.layout.main_file,
            config.levels_text,
            baseline.steps_per_second,
            baseline.batch,
            baseline.device,
            prompts.target(config.target).language,
        )
        record, episode, new_report, finding = loop.attempt(number, "optimize", task)
        iterations.append(record)
        measured: Throughput | str = "not measured: the port no longer verifies"
        if finding is None:
            measured = loop.measurer(loop.spec, loop.ws.port_dir, config.throughput_batch)
        if isinstance(measured, Throughput):
            record.steps_per_second = measured.steps_per_second
        if (
            isinstance(measured, Throughput)
            and measured.steps_per_second > baseline.steps_per_second
        ):
            gain = measured.steps_per_second / baseline.steps_per_second
            record.finding = (
                f"kept: {measured.steps_per_second:,.0f} steps/s, "
                f"{gain:.2f}x iteration {kept.number}"
            )
            baseline, kept, report = measured, record, new_report
        else:
            loop.ws.restore(kept.number)
            slower = (
                f"not faster: {measured.steps_per_second:,.0f} steps/s against "
                f"{baseline.steps_per_second:,.0f}"
                if isinstance(measured, Throughput)
                else measured
            )
            why = record.finding or slower
            record.finding = f"undone ({why}); back to iteration {kept.number}"
        if episode.status in ("budget", "model_error") or loop.out_of_time():
            break
    return report
