"""Run the levels in order over a reference and a port, stopping at the first failure."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from envforge.backends.base import Driver
from envforge.backends.recipe import Recipe, open_driver, port_recipe, reference_recipe
from envforge.backends.reference_check import first_line
from envforge.coverage.lines import LineCoverage
from envforge.errors import BadInput, BrokenReference, DriverFailure
from envforge.sandbox.driver import open_sandboxed
from envforge.sandbox.select import open_sandbox
from envforge.spec import EnvSpec
from envforge.spec.expr import evaluation_deadline
from envforge.untrusted.port_files import list_port
from envforge.verify.checked import CheckedDriver
from envforge.verify.context import VerifyContext, VerifyOptions
from envforge.verify.findings import Finding
from envforge.verify.levels import level as level_of
from envforge.verify.thrown import handler_of, thrown_at
from envforge.verify.verdict import LevelResult, Report

ProgressFn = Callable[[str], None]


def parse_seed_sweep(text: str) -> int:
    """``--seed-sweep``: a count, ``2^k`` (or ``2**k``), or ``full`` (all 2^32 seeds)."""
    value = text.strip().lower().replace("**", "^").replace("_", "")
    try:
        if value == "full":
            n = 1 << 32
        elif value.startswith("2^"):
            n = 1 << int(value[2:])
        else:
            n = int(value)
    except ValueError:
        raise BadInput(f"--seed-sweep {text!r}: expected a count, 2^k, or full") from None
    if not 0 <= n <= 1 << 32:
        raise BadInput(f"--seed-sweep {text!r}: seeds are uint32, so 0 <= N <= 2^32")
    return n


def failure_finding(level: int, exc: DriverFailure, sources: Sequence[Path] = ()) -> Finding:
    """The finding for a failed call. Where the failure names a line of ``sources`` (the failing
    side's files: a Rust panic's location, a traceback frame), that line is the finding's
    location and the message names its handler, as a mismatch's names the diverging field."""
    thrown = thrown_at(exc.message + "\n" + exc.detail, sources, any_script=exc.side != "port")
    handler = handler_of(thrown[0]) if thrown else None
    where = ""
    if thrown:
        where = f" (at {Path(thrown[0].file).name}:{thrown[0].line}"
        where += f", in {handler})" if handler else ")"
    finding = Finding(
        level=level,
        check=exc.check,
        message=str(exc) + where,
        detail=exc.detail[-2000:],
        seed=exc.seed,
        step=exc.step,
        state_before=exc.state_before,
        actions=exc.actions,
        extra={"side": exc.side, "call": exc.call},
    )
    if handler:
        finding.extra["handler"] = handler
    if exc.side == "reference":
        finding.reference_lines = thrown
    else:
        finding.port_lines = thrown
    return finding


COVERAGE_LEVELS = (1, 2, 3)
"""Levels whose reference coverage is measured (``--coverage``; by default for C references)."""


def start_coverage(ref: Driver) -> str | None:
    """Start counting the reference's lines; why not, when it cannot (coverage is a report, never
    a reason for a level to fail)."""
    try:
        return None if ref.coverage_start() else "this reference cannot report coverage"
    except DriverFailure as exc:
        return f"coverage could not start: {exc}"


GYMNASIUM_EXCLUDES = [
    (
        r"if self\.render_mode == \"human\":",
        "human rendering; verification runs without a render mode",
    )
]
"""Coverage exclusions every gymnasium reference gets, beside its spec's own."""


def read_coverage(
    ref: Driver, note: str | None, spec: EnvSpec
) -> tuple[list[LineCoverage] | None, str | None]:
    """The reference's coverage since ``start_coverage``, without the lines the spec excludes
    (``[verify] coverage_exclude``); or why there is none."""
    if note is not None:
        return None, note
    try:
        files = ref.coverage_read()
    except DriverFailure as exc:
        return None, f"coverage could not be read: {exc}"
    rules = [(rule.match, rule.why) for rule in spec.verify.coverage_exclude]
    if spec.reference_kind == "gymnasium":
        rules += GYMNASIUM_EXCLUDES
    if files is None or not rules:
        return files, None
    return [cov.excluding(rules) for cov in files], None


class DriverPair:
    """Opens both drivers lazily and reopens one whose process died (so later levels can run)."""

    def __init__(
        self, spec: EnvSpec, port: Path, options: VerifyOptions, other: Recipe | None = None
    ) -> None:
        self.spec = spec
        self.options = options
        self.ref_recipe = reference_recipe(spec, options.strict_float)
        self.port_recipe = other or port_recipe(spec, port, options.strict_float)
        self.ref: Driver | None = None
        self.port: Driver | None = None
        self.sandbox = open_sandbox(options.sandbox)

    def open(self) -> tuple[Driver, Driver]:
        if self.ref is None:
            self.ref = open_driver(
                self.ref_recipe,
                self.options.isolate,
                self.options.timeout_s,
                self.options.build_timeout_s,
            )
        if self.port is None:
            self.port = open_sandboxed(
                self.port_recipe,
                self.sandbox,
                self.options.isolate,
                self.options.timeout_s,
                self.options.build_timeout_s,
            )
        return self.ref, self.port

    def sources(self, side: str) -> list[Path]:
        """The open driver's source files (where a failure it raised is looked up, and what
        findings localize to). The port's are only those the host lists itself in the port
        folder (``port_files.py``): the host never opens a path the sandboxed side named."""
        if side == "reference":
            return [p.resolve() for p in self.ref.source_files()] if self.ref else []
        if self.port is None:
            return []
        if self.port_recipe.side == "reference":  # another version of a reference: its file
            return [Path(self.port_recipe.target.rsplit(":", 1)[0]).resolve()]
        return list_port(Path(self.port_recipe.target)).match(self.port.source_files())

    def drop(self, side: str) -> None:
        driver = self.ref if side == "reference" else self.port
        if driver is not None:
            driver.close()
        if side == "reference":
            self.ref = None
        else:
            self.port = None

    def close(self) -> None:
        self.drop("reference")
        self.drop("port")


def run_level(level: int, ctx: VerifyContext) -> LevelResult:
    module = importlib.import_module(level_of(level).module)
    result: LevelResult = module.run(ctx)
    return result


def verify(
    spec: EnvSpec,
    port: str | Path,
    levels: list[int] | None = None,
    options: VerifyOptions | None = None,
    progress: ProgressFn | None = None,
    other: Recipe | None = None,
) -> Report:
    """Verify ``port`` against the spec's reference at the given levels (default L0–L3).
    ``other`` puts another implementation on the port side, opened in the same sandbox: one
    version of a reference drafted from a rules text (``rules/versions.py``)."""
    options = options or VerifyOptions()
    levels = levels or [0, 1, 2, 3]
    port = Path(port)
    report = Report(env=spec.name, reference=spec.reference, port=str(port), requested=levels)
    try:
        pair = DriverPair(spec, port, options, other)
    except BrokenReference as exc:  # found before anything was built
        report.levels.append(reference_failed(levels[0], "build", exc.problem))
        return report
    try:  # the spec's expressions run here, on the host: each evaluation gets a call's time
        with evaluation_deadline(options.timeout_s or spec.verify.timeout_s):
            _run_levels(spec, levels, options, pair, report, progress)
    finally:
        pair.close()
    return report


def _run_levels(
    spec: EnvSpec,
    levels: list[int],
    options: VerifyOptions,
    pair: DriverPair,
    report: Report,
    progress: ProgressFn | None,
) -> None:
    for level in levels:
        if progress:
            progress(f"L{level}")
        start = time.perf_counter()
        try:
            ref, prt = pair.open()
            measured = options.coverage_for(spec.reference_kind) and level in COVERAGE_LEVELS
            coverage_note = start_coverage(ref) if measured else None
            if level in (1, 2, 3):  # L0 checks raw outputs itself; these compare them
                ref, prt = CheckedDriver(ref), CheckedDriver(prt)
            ctx = VerifyContext(spec, ref, prt, options, pair.sources("port"), pair.sandbox)
            result = run_level(level, ctx)
            if measured:
                result.coverage, coverage_note = read_coverage(ref, coverage_note, spec)
            if coverage_note:
                result.stats["coverage_error"] = coverage_note
        except DriverFailure as exc:
            sources = pair.sources(exc.side)
            pair.drop(exc.side)
            if exc.side == "reference":
                result = reference_failed(level, exc.call, exc.message, exc, sources)
            else:
                status = "fail" if exc.check == "contract" else "error"
                finding = failure_finding(level, exc, sources)
                result = LevelResult(level, status, f"{exc.side} failed: {exc}", [finding])
        except BadInput as exc:  # the spec cannot be checked as written (a rare valid rule,
            # an expression past its deadline)
            finding = Finding(level=level, check="spec", message=str(exc))
            summary = f"the spec cannot be checked: {exc}"
            result = LevelResult(level, "error", summary, [finding], reference_failed=True)
        result.wall_s = time.perf_counter() - start
        report.levels.append(result)
        if result.status != "pass" and not options.all_levels:
            break


def reference_failed(
    level: int,
    call: str,
    message: str,
    exc: DriverFailure | None = None,
    sources: Sequence[Path] = (),
) -> LevelResult:
    """The level's result when the reference itself failed: an error that blames no port."""
    if exc is not None:
        finding = failure_finding(level, exc, sources)
    else:
        finding = Finding(
            level=level,
            check="reference",
            message=message,
            extra={"side": "reference", "call": call},
        )
    if call == "build":
        # what the build said (a compiler's output) is the detail; envforge's own stack in the
        # child that ran it is not (a reference's own stack in reset/step is kept: it is theirs)
        finding.detail = message[-2000:] if "\n" in message else ""
    return LevelResult(
        level,
        "error",
        f"the reference failed in {call}: {first_line(message)}",
        [finding],
        reference_failed=True,
    )
