"""The next repair prompt from a verify report, for an agent envforge does not run
(``envforge verify --repair-prompt``, the MCP server's ``repair_prompt``).

The same template as envforge's own repair loop, with the verifier named as the agent runs it
and the listing of the port file the finding's lines point into.
"""

from __future__ import annotations

from pathlib import Path

from envforge.prompts import render as prompts
from envforge.spec import EnvSpec
from envforge.targets import code_language, recognised
from envforge.untrusted.port_files import PortFiles, list_port
from envforge.verify.findings import Finding
from envforge.verify.levels import EQUIVALENCE_LEVELS
from envforge.verify.verdict import Report, levels_phrase

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""Where envforge's own files are: a traceback through them shows paths relative to it."""


def next_repair_prompt(
    report: Report,
    spec: EnvSpec,
    port: Path,
    levels: str,
    verify_as: str,
    roots: list[Path],
    follow_port: bool = True,
) -> str:
    """``verify_as`` is how the agent reruns the verifier (``{levels}`` marks the levels).
    ``follow_port``: whether ``port`` itself may be a link (a path the user typed; not an
    agent's workspace)."""
    if report.passed and report.levels_not_run:
        full = levels_text(list(EQUIVALENCE_LEVELS))
        rerun = verify_as.replace("{levels}", full) if "{levels}" in verify_as else verify_as
        return (
            f"The port passes {levels_phrase(report.requested)}; "
            f"{levels_phrase(report.levels_not_run)} not run yet. It is done only when "
            f"`{rerun}` passes all of {full}: run that next.\n"
        )
    if report.passed:
        return f"The port is equivalent at levels {levels}: nothing to repair.\n"
    finding = report.first_finding()
    if finding is None:  # a level that was not passed and said only why
        failed = next(lv for lv in report.levels if lv.status != "pass")
        finding = Finding(level=failed.level, check=failed.status, message=failed.summary)
    files = list_port(port, follow_root=follow_port)
    listed = listed_file(finding, spec, files)
    return prompts.repair_task(
        finding,
        report,
        None,
        prompts.scrub_paths(str(listed or port), roots),
        files.read_text(listed) if listed else None,
        levels,
        roots,
        code_language(listed),
        verify_name=verify_as,
    )


def levels_text(levels: list[int]) -> str:
    """[0, 1, 2, 3] -> "0-3"; [1, 3] -> "1,3" (as --levels takes them)."""
    if len(levels) > 1 and levels == list(range(levels[0], levels[-1] + 1)):
        return f"{levels[0]}-{levels[-1]}"
    return ",".join(str(lv) for lv in levels)


def listed_file(finding: Finding, spec: EnvSpec, files: PortFiles) -> Path | None:
    """The port file to show with line numbers: the one the finding's port lines are in, else
    the port's main file (the JAX module, the C header, or the crate's lib.rs). Only a file the host listed
    itself in the port folder: a report's file names are the sandboxed side's (or, read back
    from ``.envforge/last-report.json``, anyone's) and are never opened as such."""
    for loc in finding.port_lines:
        name = files.name_of(loc.file)
        if name is not None:
            return files.root / name
    top = [name for name in files.names if "/" not in name]
    one = files.root / files.names[0] if len(files.names) == 1 and not files.folders else None
    if one is not None and (one.suffix == ".rs" or recognised(one)):
        return one  # a one-file port (a JAX module, a C header)
    if "Cargo.toml" in top:
        return files.root / "src/lib.rs" if "src/lib.rs" in files.names else None
    for name in (f"{spec.name}.py", "port.py"):
        if name in top:
            return files.root / name
    modules = sorted(n for n in top if n.endswith(".py") and not n.startswith(("test_", "_")))
    return files.root / modules[0] if len(modules) == 1 else None
