"""A workspace for an agent envforge does not run (`envforge prompt`): the reference and its spec,
the rendered task as AGENTS.md / CLAUDE.md / GEMINI.md, and a ``verify`` entry point.

<out>/AGENTS.md, CLAUDE.md, GEMINI.md   the same task, under each agent CLI's file name
<out>/reference/                        a copy of references/<env>/ (env.toml + sources)
<out>/port/                             where the agent writes the port
<out>/verify                            ./verify [LEVELS] [envforge verify options]
<out>/envforge-workspace.toml           what ./verify and ``envforge mcp`` verify
<out>/.mcp.json, .gemini/, .codex/      ``envforge mcp`` on this workspace, for each agent CLI
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from envforge.errors import BadInput
from envforge.prompts import render as prompts
from envforge.prompts.sources import SourceFile, reference_sources
from envforge.repair.workspace import port_layout
from envforge.spec import EnvSpec, load_spec

CONFIG_FILE = "envforge-workspace.toml"
TASK_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
"""Codex CLI reads AGENTS.md, Claude Code CLAUDE.md, Gemini CLI GEMINI.md."""
VERIFY_SCRIPT = "verify"
SKIPPED = ("__pycache__", "target", "build", ".pytest_cache")


@dataclass(frozen=True)
class WorkspaceConfig:
    """What is verified in a workspace: paths relative to ``root``."""

    root: Path
    env: str
    target: str
    spec: str
    reference: str
    """``--ref`` for the verifier: a file under reference/, or a gymnasium id."""
    port: str
    levels: str = "0-3"

    def spec_path(self) -> Path:
        return self.root / self.spec

    def port_path(self) -> Path:
        return self.root / self.port

    def load_spec(self) -> EnvSpec:
        return load_spec(self.spec_path())

    def write(self) -> None:
        fields = {k: getattr(self, k) for k in ("env", "target", "spec", "reference", "port")}
        lines = [f"{k} = {json.dumps(v)}" for k, v in (*fields.items(), ("levels", self.levels))]
        text = "# Written by `envforge prompt`: what ./verify and `envforge mcp` verify.\n"
        (self.root / CONFIG_FILE).write_text(text + "\n".join(lines) + "\n")


def load_config(root: Path) -> WorkspaceConfig:
    path = root / CONFIG_FILE
    if not path.is_file():
        raise BadInput(
            f"{root} is not an envforge workspace (no {CONFIG_FILE}); see envforge prompt"
        )
    try:
        data = tomllib.loads(path.read_text())
        return WorkspaceConfig(
            root=root.resolve(),
            **{k: str(data[k]) for k in ("env", "target", "spec", "reference", "port")},
            levels=str(data.get("levels", "0-3")),
        )
    except (tomllib.TOMLDecodeError, KeyError) as e:
        raise BadInput(f"{path}: malformed ({e})") from None


def check_out(out: Path) -> None:
    """Refuse a folder with files in it that is not an earlier workspace (we would overwrite)."""
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / CONFIG_FILE).is_file())
    ):
        raise BadInput(f"--out {out} exists and is not an envforge workspace; choose another")


def write_workspace(spec: EnvSpec, target: str, out: Path, levels: str = "0-3") -> WorkspaceConfig:
    """Write the workspace; an earlier one at ``out`` keeps its port, the rest is rewritten."""
    chosen = prompts.target(target)
    check_out(out)
    root = out.resolve()
    sources = reference_sources(spec)
    for source in sources:  # the workspace copies the spec's folder, and only that
        if source.path is not None and not source.path.resolve().is_relative_to(
            spec.root.resolve()
        ):
            raise BadInput(f"{source.path} is outside {spec.root}: cannot copy it into a workspace")
    reference = root / "reference"
    if reference.exists():
        shutil.rmtree(reference)
    shutil.copytree(spec.root, reference, ignore=shutil.ignore_patterns(*SKIPPED))
    ref_arg = _reference_argument(spec, reference, sources)
    layout = port_layout(spec, target)
    (root / "port").mkdir(exist_ok=True)
    config = WorkspaceConfig(
        root=root,
        env=spec.name,
        target=target,
        spec="reference/env.toml",
        reference=ref_arg,
        port="port",
        levels=levels,
    )
    config.write()
    workspace_spec = config.load_spec()  # reference lines in findings point into reference/
    shown = [  # labelled as the agent finds them in the workspace
        replace(s, name=str(s.path.resolve().relative_to(root))) if s.path else s
        for s in reference_sources(workspace_spec)
    ]
    context = prompts.translation_context(
        workspace_spec, target, layout.port_rel, shown, "./verify", config.spec
    )
    task = prompts.render(
        "agent_workspace.j2",
        spec=workspace_spec,
        target_name=chosen.name,
        port_path=layout.port_rel,
        reference_copy="reference/",
        levels=levels,
        verify_name="./verify",
        workspace_hint=shlex.quote(str(root)),
        context=context,
    )
    for name in TASK_FILES:
        (root / name).write_text(task)
    script = root / VERIFY_SCRIPT
    script.write_text(verify_script(config))
    script.chmod(0o755)
    write_mcp_configs(root)
    return config


MCP_TIMEOUT_S = 1800
"""A full verification takes minutes; agent CLIs cut tool calls far sooner by default."""


def mcp_command(root: Path) -> tuple[str, list[str]]:
    """``envforge mcp`` on this workspace, through the interpreter that wrote it."""
    return sys.executable, ["-m", "envforge.cli", "mcp", "--workspace", str(root)]


def write_mcp_configs(root: Path) -> None:
    """Project-level MCP configs, so an agent CLI started in the workspace finds the verifier:
    ``.mcp.json`` (Claude Code), ``.gemini/settings.json`` (Gemini CLI), ``.codex/config.toml``
    (Codex CLI; read in trusted projects). Each asks the user before it starts a server."""
    command, args = mcp_command(root)
    server = {"command": command, "args": args}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"envforge": server}}, indent=2))
    gemini = {"mcpServers": {"envforge": {**server, "timeout": MCP_TIMEOUT_S * 1000}}}
    (root / ".gemini").mkdir(exist_ok=True)
    (root / ".gemini" / "settings.json").write_text(json.dumps(gemini, indent=2))
    (root / ".codex").mkdir(exist_ok=True)
    (root / ".codex" / "config.toml").write_text(
        "[mcp_servers.envforge]\n"
        f"command = {json.dumps(command)}\n"
        f"args = {json.dumps(args)}\n"
        "startup_timeout_sec = 60\n"
        f"tool_timeout_sec = {MCP_TIMEOUT_S}\n"
    )


def _reference_argument(spec: EnvSpec, copy: Path, sources: list[SourceFile]) -> str:
    """The reference as the workspace's verifier names it; a gymnasium class is also written
    out (without its drawing code) so the agent can read it beside the spec."""
    if spec.reference_kind == "gymnasium":
        source = sources[0]
        (copy / f"{spec.name}_gymnasium.py").write_text(f"# {source.name}\n{source.text}")
        return spec.reference
    path = spec.reference_path()
    if path is None:
        return spec.reference
    relative = path.resolve().relative_to(spec.root.resolve())
    suffix = spec.reference.split(":", 1)[1] if spec.reference_kind == "python" else ""
    return f"reference/{relative}" + (f":{suffix}" if suffix else "")


def verify_script(config: WorkspaceConfig) -> str:
    """``./verify [LEVELS] [options]``: envforge verify on the port, ending with the next repair
    prompt. The interpreter is the one that wrote the workspace ($ENVFORGE_PYTHON overrides)."""
    command = [
        "-m",
        "envforge.cli",
        "verify",
        "--spec",
        config.spec,
        "--ref",
        config.reference,
        "--port",
        config.port,
        "--repair-prompt",
        "--verify-as",
        "./verify {levels}",
    ]
    quoted = " ".join(shlex.quote(part) for part in command)
    return f"""#!/bin/sh
# envforge verify on this workspace's port. Usage: ./verify [LEVELS] [envforge verify options]
# (LEVELS default {config.levels}; e.g. ./verify 0, ./verify 0-3 --scale 0.2, ./verify --json)
cd "$(dirname "$0")" || exit 2
python=${{ENVFORGE_PYTHON:-}}
[ -n "$python" ] || python={shlex.quote(sys.executable)}
levels={shlex.quote(config.levels)}
case "$1" in
  ""|-*) ;;
  *) levels="$1"; shift ;;
esac
exec "$python" {quoted} --levels "$levels" "$@"
"""
