"""The next repair prompt from a verify report, for an agent envforge does not run
(``envforge verify --repair-prompt``, the MCP server's ``repair_prompt``).

The same template as envforge's own repair loop, with the verifier named as the agent runs it
and the listing of the port file the finding's lines point into.
"""

from __future__ import annotations

from pathlib import Path

from envforge.backends.recipe import port_kind
from envforge.errors import BadInput
from envforge.prompts import render as prompts
from envforge.spec import EnvSpec
from envforge.verify.findings import Finding
from envforge.verify.verdict import Report

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""Where envforge's own files are: a traceback through them shows paths relative to it."""


def next_repair_prompt(
    report: Report, spec: EnvSpec, port: Path, levels: str, verify_as: str, roots: list[Path]
) -> str:
    """``verify_as`` is how the agent reruns the verifier (``{levels}`` marks the levels)."""
    if report.passed:
        return f"The port is equivalent at levels {levels}: nothing to repair.\n"
    finding = report.first_finding()
    if finding is None:  # a level that was not passed and said only why
        failed = next(lv for lv in report.levels if lv.status != "pass")
        finding = Finding(level=failed.level, check=failed.status, message=failed.summary)
    listed = listed_file(finding, spec, port)
    return prompts.repair_task(
        finding,
        report,
        None,
        prompts.scrub_paths(str(listed or port), roots),
        listed.read_text(errors="replace") if listed else None,
        levels,
        roots,
        "rust" if listed is not None and listed.suffix == ".rs" else "python",
        verify_name=verify_as,
    )


def levels_text(levels: list[int]) -> str:
    """[0, 1, 2, 3] -> "0-3"; [1, 3] -> "1,3" (as --levels takes them)."""
    if len(levels) > 1 and levels == list(range(levels[0], levels[-1] + 1)):
        return f"{levels[0]}-{levels[-1]}"
    return ",".join(str(lv) for lv in levels)


def listed_file(finding: Finding, spec: EnvSpec, port: Path) -> Path | None:
    """The port file to show with line numbers: the one the finding's port lines are in, else
    the port's main file (the JAX module, or the crate's lib.rs)."""
    for loc in finding.port_lines:
        if Path(loc.file).is_file():
            return Path(loc.file)
    if port.is_file():
        return port
    try:
        kind = port_kind(port)
    except BadInput:
        return None
    if kind == "rust":
        main = port / "src" / "lib.rs"
        return main if main.is_file() else None
    from envforge.backends.jax import find_port_module

    try:
        return find_port_module(port, spec.name)
    except BadInput:  # no module yet, or several: the prompt then shows no listing
        return None
