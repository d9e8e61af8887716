"""translate → verify → repair: the loop that owns success.

An agent episode writes or edits the port; then the verifier (not the agent) decides. A failing
report's most localized finding becomes the next episode's repair prompt. The loop stops when
the port verifies, when the iteration limit or the time limit is reached, or when the budget
cannot cover the next call. Every iteration leaves its port, report, cost and transcript in the
workspace; the final port lands in ``out`` with PROVENANCE.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from envforge.agents.host_paths import hide_host_paths
from envforge.agents.loop import Agent, AgentLimits, AgentResult
from envforge.agents.messages import Usage, user
from envforge.agents.model import ModelError, retry_wait_s
from envforge.agents.tools import WorkspaceTools
from envforge.cost.meter import Meter
from envforge.errors import BadInput, BrokenReference
from envforge.prompts import render as prompts
from envforge.prompts.sources import reference_sources
from envforge.sandbox.base import Sandbox
from envforge.spec import EnvSpec
from envforge.translate.progress import RunState
from envforge.translate.throughput import Throughput, measure_sandboxed
from envforge.translate.workspace import RunWorkspace
from envforge.verify.context import VerifyOptions
from envforge.verify.findings import Finding
from envforge.verify.levels import parse_levels
from envforge.verify.runner import verify
from envforge.verify.verdict import Report

ProgressFn = Callable[[str], None]
Verifier = Callable[[EnvSpec, Path, list[int], VerifyOptions], Report]
"""Verifies a port folder at some levels; ``verify`` itself, or a caching wrapper around it."""
Measurer = Callable[[EnvSpec, Path, int], Throughput | str]
"""Measures a port's steps/s (or says why it could not); by default ``measure_sandboxed`` in
the verification's sandbox (``RepairConfig.verify.sandbox``), timed by the host."""


@dataclass(frozen=True)
class RepairConfig:
    target: str = "jax"
    levels: tuple[int, ...] = (0, 1, 2, 3)
    transfer: bool = False
    """Also require L4 (policy transfer); it runs only once L0–L3 pass."""
    max_iters: int = 20
    """Agent episodes: the translation plus the repairs."""
    max_wall_s: float | None = None
    """Wall-clock limit of the whole run."""
    agent: AgentLimits = field(default_factory=AgentLimits)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    optimize_rounds: int = 0
    """Episodes asking for speed once verified (JAX ports); a round that breaks verification
    or is not faster is undone."""
    throughput_batch: int = 4096

    @property
    def all_levels(self) -> list[int]:
        return sorted(set(self.levels) | ({4} if self.transfer else set()))

    @property
    def levels_text(self) -> str:
        levels = self.all_levels
        contiguous = levels == list(range(levels[0], levels[-1] + 1))
        if contiguous and len(levels) > 1:
            return f"{levels[0]}-{levels[-1]}"
        return ",".join(str(lv) for lv in levels)


@dataclass
class Iteration:
    number: int
    kind: str
    """translate | repair | optimize"""
    agent_status: str
    steps: int
    verdict: str
    level_status: dict[int, str]
    calls: int
    usage: Usage
    cost_usd: Decimal
    finding: str
    """One line: the finding the next repair prompt is built from (empty when verified)."""
    steps_per_second: float | None = None
    """Measured throughput (optimize rounds and the verified port they start from)."""
    wall_s: float = 0.0
    """Seconds the episode and its verification took, ..."""
    retry_wait_s: float = 0.0
    """... of which this many were spent waiting to retry the provider."""

    def to_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "number": self.number,
            "kind": self.kind,
            "agent_status": self.agent_status,
            "steps": self.steps,
            "verdict": self.verdict,
            "levels": {str(k): v for k, v in self.level_status.items()},
            "calls": self.calls,
            "cost_usd": str(self.cost_usd),
            "finding": self.finding,
            "steps_per_second": self.steps_per_second,
            "wall_s": round(self.wall_s, 1),
            "retry_wait_s": round(self.retry_wait_s, 1),
            "usage": {
                "input": u.input_tokens,
                "output": u.output_tokens,
                "cache_read": u.cache_read_tokens,
                "cache_write": u.cache_write_tokens,
                "cache_write_1h": u.cache_write_1h_tokens,
            },
        }


@dataclass
class RepairResult:
    status: str
    """verified | iteration_limit | time_limit | budget | model_error"""
    message: str
    iterations: list[Iteration]
    report: Report | None
    workspace: Path
    last_verify: str = ""
    """The run's last verification as run_verify shows it (verdict, levels, coverage notes,
    first finding): what the model would have read next, also when it never did."""

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    @property
    def levels_passed(self) -> list[int]:
        if self.report is None:
            return []
        return [lv.level for lv in self.report.levels if lv.status == "pass"]


class RepairLoop:
    def __init__(
        self,
        spec: EnvSpec,
        model: Meter,
        workspace: Path,
        config: RepairConfig | None = None,
        sandbox: Sandbox | None = None,
        progress: ProgressFn | None = None,
        verifier: Verifier | None = None,
        measurer: Measurer | None = None,
        state: RunState | None = None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.verifier: Verifier = verifier or verify
        self.config = config or RepairConfig()
        self.measurer: Measurer = measurer or self.measure
        self._progress = progress or (lambda _: None)
        self.state = state or RunState()
        """Where the run stands, for a live view (``translate/progress.py``)."""
        prompts.target(self.config.target)
        self.ws = RunWorkspace(workspace, spec, self.config.target)
        self.roots = [self.ws.root, spec.root.parent.parent]
        sources = reference_sources(spec)
        reference_copy = self.ws.copy_reference(sources)
        self.prompt = prompts.translation_prompt(
            spec,
            self.config.target,
            self.ws.layout.port_rel,
            self.config.levels_text,
            reference_copy,
            sources,
        )
        self.tools = WorkspaceTools(
            self.ws.root,
            self.verify_text,
            sandbox,
            self.config.levels_text,
            port_dir=self.ws.port_dir,
        )
        self.started = time.monotonic()
        self.last_verify = ""
        deadline = None if self.config.max_wall_s is None else self.started + self.config.max_wall_s
        self.state.update(max_episodes=self.config.max_iters, deadline=deadline)

    def progress(self, message: str, doing: str | None = None) -> None:
        """Tell the progress callback, and bring the live state up to date."""
        self.state.update(
            doing=doing or message.split(": ", 1)[-1],
            calls=self.model.calls,
            usage=self.model.usage,
            cost_usd=self.model.cost_usd,
            retry_wait_s=retry_wait_s(self.model),
        )
        self._progress(message)

    def measure(self, spec: EnvSpec, port_dir: Path, batch: int) -> Throughput | str:
        """The port's steps/s in the sandbox that verifies it, timed by the host."""
        return measure_sandboxed(spec, port_dir, batch, sandbox_kind=self.config.verify.sandbox)

    # ---- verification -----------------------------------------------------------------
    def check(self, levels: list[int]) -> tuple[Report | None, Finding | None]:
        """Verify the workspace port: the report and the finding to repair next (None: passed)."""
        files = self.ws.port_files()
        if files.refused:  # links an agent's command made: refused, never followed or copied
            return None, Finding(level=0, check="port_files", message=files.refusal_text())
        if not files.names:
            missing = f"no port at {self.ws.layout.port_rel}"
            return None, Finding(level=0, check="missing_port", message=missing)
        try:
            report = self.verifier(self.spec, self.ws.port_dir, levels, self.config.verify)
        except BrokenReference:
            raise  # no port can be repaired against a broken reference
        except BadInput as e:
            return None, Finding(level=0, check="missing_port", message=str(e))
        if report.reference_error is not None:
            raise BrokenReference(report.reference_error)
        if report.passed:
            return report, None
        finding = report.first_finding()
        if finding is None:
            failed = next(lv for lv in report.levels if lv.status != "pass")
            finding = Finding(level=failed.level, check=failed.status, message=failed.summary)
        return report, finding

    def verify_text(self, levels: str) -> str:
        """run_verify for the agent."""
        try:
            wanted = parse_levels(levels)
        except BadInput as e:
            return f"error: {e}"
        self.progress(f"run_verify {levels}: verifying")
        report, finding = self.check(wanted)
        verdict = report.verdict_line() if report is not None else "no port"
        self.state.update(verdict=f"{verdict} (the agent's run_verify {levels})")
        if report is None:
            assert finding is not None
            message = prompts.scrub_paths(finding.message, self.roots)
            return prompts.missing_port_task(message, self.ws.layout.port_rel)
        return prompts.verify_result(report, self.roots)

    def repair_prompt(self, report: Report | None, finding: Finding, number: int) -> str:
        # a finding's detail may hold a traceback through the virtualenv: no host paths
        return hide_host_paths(self._repair_prompt(report, finding, number), [self.ws.root])

    def _repair_prompt(self, report: Report | None, finding: Finding, number: int) -> str:
        if finding.check in ("missing_port", "port_files"):
            return prompts.missing_port_task(
                prompts.scrub_paths(finding.message, self.roots), self.ws.layout.port_rel
            )
        return prompts.repair_task(
            finding,
            report,
            number,
            self.ws.layout.main_file,
            self.ws.port_source(),
            self.config.levels_text,
            self.roots,
            prompts.target(self.config.target).language,
        )

    # ---- the loop ---------------------------------------------------------------------
    def time_left(self) -> float | None:
        """Seconds of the run's wall-clock limit left (None: no limit)."""
        if self.config.max_wall_s is None:
            return None
        return self.config.max_wall_s - (time.monotonic() - self.started)

    def episode(self, task: str, purpose: str, number: int) -> AgentResult:
        limits = self.config.agent
        left = self.time_left()
        if left is not None:  # an episode has the run's time left, or less when given its own
            own = limits.max_wall_s
            limits = replace(limits, max_wall_s=left if own is None else min(own, left))
        self.model.purpose = purpose

        def on_event(message: str) -> None:
            self.progress(f"{purpose}: {message} [${self.model.cost_usd:.4f}]", message)

        transcript = self.ws.start_transcript(number)
        agent = Agent(self.model, self.tools, limits, on_event, transcript)
        first = user(self.prompt.context, task, cache_first=True)
        return agent.run(self.prompt.system, first)

    def attempt(
        self, number: int, kind: str, task: str
    ) -> tuple[Iteration, AgentResult, Report | None, Finding | None]:
        """One agent episode, then the verifier; recorded and snapshotted as iteration ``number``."""
        calls, usage, cost = self.model.calls, self.model.usage, self.model.cost_usd
        started, waited = time.monotonic(), retry_wait_s(self.model)
        self.state.update(episode=number, kind=kind)
        self.progress(f"{kind} {number}: agent working")
        try:
            episode = self.episode(task, f"{kind} {number}", number)
        except ModelError as e:
            episode = AgentResult("model_error", str(e), 0, [])
        self.progress(f"{kind} {number}: verifying")
        report, finding = self.check(self.config.all_levels)
        record = Iteration(
            number=number,
            kind=kind,
            agent_status=episode.status,
            steps=episode.steps,
            verdict=report.verdict if report else "no port",
            level_status={lv.level: lv.status for lv in report.levels} if report else {},
            calls=self.model.calls - calls,
            usage=self.model.usage - usage,
            cost_usd=self.model.cost_usd - cost,
            finding=_one_line(finding),
            wall_s=time.monotonic() - started,
            retry_wait_s=retry_wait_s(self.model) - waited,
        )
        self.last_verify = self.verification_text(report, finding)
        self.ws.snapshot(number, report, record.to_dict())
        self.state.update(verdict=f"{record.verdict} (envforge's check after {kind} {number})")
        self.progress(f"{kind} {number}: {record.verdict} [${self.model.cost_usd:.4f}]")
        return record, episode, report, finding

    def out_of_time(self) -> bool:
        limit = self.config.max_wall_s
        return limit is not None and time.monotonic() - self.started >= limit

    def run(self) -> RepairResult:
        iterations: list[Iteration] = []
        task, kind = self.prompt.task, "translate"
        report: Report | None = None
        status = "iteration_limit"
        message = f"not verified after {self.config.max_iters} iterations"
        for number in range(1, self.config.max_iters + 1):
            record, episode, report, finding = self.attempt(number, kind, task)
            iterations.append(record)
            if finding is None:
                status, message = "verified", f"verified at levels {self.config.levels_text}"
                break
            if episode.status in ("budget", "model_error"):
                status, message = episode.status, episode.message
                break
            if self.out_of_time():
                waited = sum(it.retry_wait_s for it in iterations)
                status = "time_limit"
                message = (
                    f"time limit {self.config.max_wall_s:.0f}s reached ({waited:.0f}s of it "
                    "waiting on provider retries)"
                )
                break
            task, kind = self.repair_prompt(report, finding, number), "repair"
        if status == "verified" and self.config.optimize_rounds > 0:
            from envforge.translate.optimize import optimize

            report = optimize(self, iterations, report)
            if report is not None:
                self.last_verify = self.verification_text(report, None)
        return RepairResult(status, message, iterations, report, self.ws.root, self.last_verify)

    def verification_text(self, report: Report | None, finding: Finding | None) -> str:
        """A verification as run_verify would have shown it to the model."""
        if report is None:
            message = finding.message if finding is not None else "no port"
            text = prompts.missing_port_task(
                prompts.scrub_paths(message, self.roots), self.ws.layout.port_rel
            )
        else:
            text = prompts.verify_result(report, self.roots)
        return hide_host_paths(text, [self.ws.root])


def _one_line(finding: Finding | None) -> str:
    if finding is None:
        return ""
    fields = f" [{', '.join(finding.fields)}]" if finding.fields else ""
    return " ".join(f"L{finding.level} {finding.check}{fields}: {finding.message}".split())[:200]
