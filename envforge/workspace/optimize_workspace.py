"""``envforge prompt --optimize``: a workspace whose task is "make this verified port faster".

It is the translation workspace (``workspace/write.py``: reference/, ./verify, the MCP
configs) with the port already in ``port/`` (the shipped one, or ``--port P``), the task
replaced by ``prompts/optimize_workspace.j2``, and two more entry points beside ./verify:

<out>/bench     ./bench [options]: envforge bench of port/ beside the reference (host-timed)
<out>/profile   ./profile [options]: envforge profile of port/
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from envforge.errors import BadInput
from envforge.prompts import render as prompts
from envforge.resolve import chosen_port
from envforge.spec import EnvSpec
from envforge.translate.workspace import port_layout
from envforge.untrusted.port_files import NotListed, list_port
from envforge.untrusted.regular import write_file
from envforge.untrusted.scripts import entry_script
from envforge.workspace.write import (
    TASK_FILES,
    WorkspaceConfig,
    write_part,
    write_workspace,
)

BENCH_SCRIPT = "bench"
PROFILE_SCRIPT = "profile"
BENCH_BATCHES = "1,1024"
"""./bench's default batches: one env, and a batch a trainer would step."""
SKIPPED = ("target", "__pycache__", ".pytest_cache", "PROVENANCE.md")


def write_optimize_workspace(
    spec: EnvSpec, target: str, out: Path, levels: str = "0-3", port: str | None = None
) -> WorkspaceConfig:
    """Write the workspace with the starting port in ``port/`` (an earlier workspace's port is
    replaced), the optimize task, ./bench and ./profile."""
    origin = chosen_port(spec, port, target)  # --port P, else the shipped one
    config = write_workspace(spec, target, out, levels)
    copy_port(origin, config.port_path())
    layout = port_layout(spec, target)
    task = prompts.render(
        "optimize_workspace.j2",
        spec=spec,
        target=target,
        target_name=prompts.target(target).name,
        port_path=layout.port_rel,
        origin=_shown(origin),
        levels=levels,
        batches=BENCH_BATCHES,
    )
    for name in TASK_FILES:
        write_part(config.root, name, task)
    write_part(config.root, BENCH_SCRIPT, bench_script(config), mode=0o755)
    write_part(config.root, PROFILE_SCRIPT, profile_script(config), mode=0o755)
    return config


def copy_port(origin: Path, port_dir: Path) -> None:
    """``origin`` (a folder, or a JAX module file) into ``port_dir``, emptied first: only its
    regular files (as the host lists a port), each copied by the one rule; a link or special
    file in it is refused by name, never followed into the agent's workspace."""
    files = list_port(origin)
    if files.refused:
        raise BadInput(f"--optimize: {origin}: {files.refusal_text()}")
    try:
        if port_dir.exists():
            shutil.rmtree(port_dir)
        port_dir.mkdir()
        for name in files.names:
            if Path(name).name in SKIPPED:
                continue
            with files.open(name) as fd:
                write_file(port_dir, name, fd, stat.S_IMODE(os.fstat(fd).st_mode))
    except (OSError, NotListed) as e:
        raise BadInput(f"--optimize: cannot copy {origin} into {port_dir} ({e})") from None


def _shown(origin: Path) -> str:
    parts = origin.parts
    return "/".join(parts[parts.index("generated") :]) if "generated" in parts else origin.name


def bench_script(config: WorkspaceConfig) -> str:
    """``./bench [options]``: the reference and port/ side by side (``envforge bench --port``)."""
    command = ["-m", "envforge.cli", "bench", config.env, "--port", str(config.port_path())]
    command += ["--target", config.target, "--batch", BENCH_BATCHES, "--policy", "random"]
    usage = "steps/s of the reference and of port/, timed by the host. Usage: ./bench [options]"
    return entry_script(BENCH_SCRIPT, usage, command)


def profile_script(config: WorkspaceConfig) -> str:
    """``./profile [options]``: ``envforge profile`` of port/."""
    command = ["-m", "envforge.cli", "profile", config.env, "--port", str(config.port_path())]
    command += ["--target", config.target]
    usage = "where a batched step of port/ spends its time. Usage: ./profile [--batch B] [--json]"
    return entry_script(PROFILE_SCRIPT, usage, command)
