"""Optimize rounds: once a port verifies, ask for speed, and keep a change only if the port
still verifies and measures faster; otherwise put the last verified port back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envforge.prompts import render as prompts
from envforge.repair.throughput import Throughput
from envforge.verify.verdict import Report

if TYPE_CHECKING:
    from envforge.repair.orchestrate import Iteration, RepairLoop


def optimize(loop: RepairLoop, iterations: list[Iteration], report: Report | None) -> Report | None:
    """Run ``loop.config.optimize_rounds`` rounds after iteration ``iterations[-1]`` verified.

    Returns the report of the port that stays (the last verified one)."""
    config = loop.config
    if config.target != "jax":
        loop.progress(f"optimize: throughput is measured for JAX ports only, not {config.target}")
        return report
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
            baseline, kept, report = measured, record, new_report
            record.finding = f"kept: {measured.steps_per_second:,.0f} steps/s"
        else:
            loop.ws.restore(kept.number)
            why = record.finding or (measured if isinstance(measured, str) else "not faster")
            record.finding = f"undone ({why}); back to iteration {kept.number}"
        if episode.status in ("budget", "model_error") or loop.out_of_time():
            break
    return report
