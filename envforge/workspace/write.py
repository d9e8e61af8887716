"""A workspace for an agent envforge does not run (`envforge prompt`): the reference and its spec,
the rendered task as AGENTS.md / CLAUDE.md / GEMINI.md, and a ``verify`` entry point.

<out>/AGENTS.md, CLAUDE.md, GEMINI.md   the same task, under each agent CLI's file name
<out>/reference/                        a copy of references/<env>/ (env.toml + sources)
<out>/port/                             where the agent writes the port
<out>/verify                            ./verify [LEVELS] [envforge verify options]
<out>/envforge-workspace.toml           what ./verify and ``envforge mcp`` verify (to read)
<out>/.mcp.json, .gemini/, .codex/      ``envforge mcp`` on this workspace, for each agent CLI

What is verified is recorded outside the workspace (``workspace/pinned.py``): the agent may
rewrite any file here. Every entry point starts an absolute interpreter in isolated mode
(``-I``: no working folder, no ``PYTHON*`` variables on its import path), so a module the agent
writes into the workspace is never imported by the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from envforge.errors import BadInput
from envforge.prompts import render as prompts
from envforge.prompts.sources import SourceFile, reference_sources
from envforge.spec import EnvSpec, load_spec, spec_for_reference
from envforge.translate.workspace import port_layout
from envforge.untrusted.port_files import PortFiles, copy_port, list_port
from envforge.untrusted.scripts import ISOLATED, entry_script
from envforge.workspace.agent_task import render_task
from envforge.workspace.pinned import check_pin, load_pin, real_files, record
from envforge.workspace.reference_copy import tidy_copy

CONFIG_FILE = "envforge-workspace.toml"
TASK_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
"""Codex CLI reads AGENTS.md, Claude Code CLAUDE.md, Gemini CLI GEMINI.md."""
VERIFY_SCRIPT = "verify"
SKIPPED = ("__pycache__", "target", "build", ".pytest_cache", "drafts")
"""Never copied into a workspace; ``drafts/`` holds a rules-drafted reference's other versions
and its rule questions (docs/RULES.md): the project's record, not the reference."""
FOLDERS = ("reference", "port", ".gemini", ".codex")
FILES = (
    CONFIG_FILE,
    *TASK_FILES,
    VERIFY_SCRIPT,
    ".mcp.json",
    ".gemini/settings.json",
    ".codex/config.toml",
)
"""The parts of a workspace envforge writes (an agent works in it, and may have replaced any)."""


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
    pinned: bool = False
    """Whether spec and reference are the real ones envforge recorded (``load_config``)."""

    def spec_path(self) -> Path:
        return self.root / self.spec

    def port_path(self) -> Path:
        return self.root / self.port

    def load_spec(self) -> EnvSpec:
        if self.pinned:  # the recorded --ref, as the workspace was written with it
            return spec_for_reference(self.reference, str(self.spec_path()))
        return load_spec(self.spec_path())

    def write(self) -> None:
        fields = {k: getattr(self, k) for k in ("env", "target", "spec", "reference", "port")}
        lines = [f"{k} = {json.dumps(v)}" for k, v in (*fields.items(), ("levels", self.levels))]
        text = (
            "# Written by `envforge prompt`, to read: ./verify and `envforge mcp` verify port/\n"
            "# against the real reference, as envforge recorded it outside this workspace.\n"
        )
        write_part(self.root, CONFIG_FILE, text + "\n".join(lines) + "\n")


def load_config(root: Path) -> WorkspaceConfig:
    """What the workspace at ``root`` verifies, from envforge's record of writing it (never
    from the workspace's own files); WorkspaceEdited when its reference copy was changed."""
    if not (root / CONFIG_FILE).is_file():
        raise BadInput(
            f"{root} is not an envforge workspace (no {CONFIG_FILE}); see envforge prompt"
        )
    pin = load_pin(root)
    check_pin(pin)
    return WorkspaceConfig(
        pin.root, pin.env, pin.target, pin.spec, pin.reference, "port", pin.levels, pinned=True
    )


def check_out(out: Path) -> None:
    """Refuse a folder with files in it that is not an earlier workspace (we would overwrite)."""
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / CONFIG_FILE).is_file())
    ):
        raise BadInput(f"--out {out} exists and is not an envforge workspace; choose another")


def check_parts(root: Path) -> None:
    """Refuse a workspace whose parts are symbolic links or not the kind of file they should be:
    rewriting it would write (or delete) through a link, or block on a FIFO."""
    for part in (*FOLDERS, *FILES):  # folders first: a linked .gemini/ is named as itself
        path = root / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as e:
            raise BadInput(f"workspace part {path}: cannot be checked ({e.strerror})") from None
        want, ok = ("a folder", stat.S_ISDIR) if part in FOLDERS else ("a file", stat.S_ISREG)
        if stat.S_ISLNK(mode):
            raise BadInput(
                f"workspace part {path} is a symbolic link: envforge does not write through "
                "links; remove it or choose another --out"
            )
        if not ok(mode):
            raise BadInput(f"workspace part {path} is not {want} ({stat.filemode(mode)})")


_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_part(root: Path, part: str, text: str, mode: int | None = None) -> None:
    """Write ``root/part`` without following a link anywhere below ``root`` (every folder is
    opened relative to the last, refusing links), and only into a plain regular file."""
    path = root / part
    *folders, name = part.split("/")
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    try:
        for folder in folders:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, dir_fd=fds[-1])
            fds.append(os.open(folder, _DIR_FLAGS, dir_fd=fds[-1]))
        fd = os.open(name, _WRITE_FLAGS, 0o644, dir_fd=fds[-1])
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise BadInput(f"workspace part {path} is not a plain file: not written")
            os.ftruncate(fd, 0)
            data = text.encode()
            while data:
                data = data[os.write(fd, data) :]
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
    except OSError as e:  # ELOOP: a link; ENXIO: a FIFO with no reader
        raise BadInput(f"workspace part {path}: not written ({e.strerror})") from None
    finally:
        for fd in fds:
            os.close(fd)


def write_workspace(spec: EnvSpec, target: str, out: Path, levels: str = "0-3") -> WorkspaceConfig:
    """Write the workspace; an earlier one at ``out`` keeps its port, the rest is rewritten.
    Its parts must not be links (:func:`check_parts`); files are written without following
    any (:func:`write_part`)."""
    prompts.target(target)  # an unknown target is refused before anything is written
    check_out(out)
    root = out.resolve()
    check_parts(root)
    sources = reference_sources(spec)
    for source in sources:  # the workspace copies the spec's folder (and library code to read)
        if source.library is not None:
            continue
        if source.path is not None and not source.path.resolve().is_relative_to(
            spec.root.resolve()
        ):
            raise BadInput(f"{source.path} is outside {spec.root}: cannot copy it into a workspace")
    reference = root / "reference"
    try:
        if reference.exists():
            shutil.rmtree(reference)
        copy_port(_reference_files(spec), reference)  # regular files only, by the one rule
        tidy_copy(spec, reference)  # the implementer's part of README.md; no shipped ports
        for source in sources:
            if source.library is not None:
                copy = reference / source.library
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_text(source.text)  # verbatim: findings cite its lines
        (root / "port").mkdir(exist_ok=True)
    except OSError as e:  # a part replaced while we wrote (check_parts passed)
        raise BadInput(f"workspace {root}: cannot write {e.filename or 'it'} ({e})") from None
    ref_arg = _reference_argument(spec, reference, sources)
    layout = port_layout(spec, target)
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
    workspace_spec = config.load_spec()  # the task's reference lines point into reference/
    shown = [  # labelled as the agent finds them in the workspace
        replace(s, name=_shown_name(s, root, reference)) if s.path else s
        for s in reference_sources(workspace_spec)
    ]
    task = render_task(workspace_spec, target, layout.port_rel, shown, levels, root, config.spec)
    for name in TASK_FILES:
        write_part(root, name, task)
    write_part(root, VERIFY_SCRIPT, verify_script(config), mode=0o755)
    write_mcp_configs(root)
    real_spec = spec.root / "env.toml"
    pin = record(
        root, spec.name, target, real_spec, _real_reference(spec), levels,
        real_files(real_spec, sources),
    )  # fmt: skip
    return WorkspaceConfig(
        root, spec.name, target, pin.spec, pin.reference, "port", levels, pinned=True
    )


def _real_reference(spec: EnvSpec) -> str:
    """The reference as the workspace's verifier names it: the real file, absolute."""
    path = spec.reference_path()
    if path is None:
        return spec.reference
    suffix = spec.reference.split(":", 1)[1] if spec.reference_kind == "python" else ""
    return str(path.resolve()) + (f":{suffix}" if suffix else "")


def _reference_files(spec: EnvSpec) -> PortFiles:
    """The spec's folder as the host lists it, less what a workspace never gets; a link or
    special file in it is refused by name (it would be followed into the agent's workspace)."""
    files = list_port(spec.root)
    if files.refused:
        raise BadInput(f"{spec.root}: {files.refusal_text()}")

    def kept(name: str) -> bool:
        return not set(Path(name).parts) & set(SKIPPED)

    names = tuple(n for n in files.names if kept(n))
    return replace(files, names=names, folders=tuple(f for f in files.folders if kept(f)))


def _shown_name(source: SourceFile, root: Path, reference: Path) -> str:
    """A source as the agent finds it in the workspace (library code: its copy)."""
    path = reference / source.library if source.library is not None else source.path
    assert path is not None
    return str(path.resolve().relative_to(root))


MCP_TIMEOUT_S = 1800
"""A full verification takes minutes; agent CLIs cut tool calls far sooner by default."""


def mcp_command(root: Path) -> tuple[str, list[str]]:
    """``envforge mcp`` on this workspace, through the interpreter that wrote it, isolated."""
    return sys.executable, [ISOLATED, "-m", "envforge.cli", "mcp", "--workspace", str(root)]


def write_mcp_configs(root: Path) -> None:
    """Project-level MCP configs, so an agent CLI started in the workspace finds the verifier:
    ``.mcp.json`` (Claude Code), ``.gemini/settings.json`` (Gemini CLI), ``.codex/config.toml``
    (Codex CLI; read in trusted projects). Each asks the user before it starts a server."""
    command, args = mcp_command(root)
    server = {"command": command, "args": args}
    write_part(root, ".mcp.json", json.dumps({"mcpServers": {"envforge": server}}, indent=2))
    gemini = {"mcpServers": {"envforge": {**server, "timeout": MCP_TIMEOUT_S * 1000}}}
    write_part(root, ".gemini/settings.json", json.dumps(gemini, indent=2))
    write_part(
        root,
        ".codex/config.toml",
        "[mcp_servers.envforge]\n"
        f"command = {json.dumps(command)}\n"
        f"args = {json.dumps(args)}\n"
        "startup_timeout_sec = 60\n"
        f"tool_timeout_sec = {MCP_TIMEOUT_S}\n",
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
    """``./verify [LEVELS] [options]``: envforge verify on the port against the recorded
    reference (``verify --workspace``), ending with the next repair prompt."""
    command = ["-m", "envforge.cli", "verify", "--workspace", str(config.root), "--repair-prompt"]
    usage = (
        "envforge verify on this workspace's port. Usage: ./verify [LEVELS] [envforge verify "
        f"options]\n# (LEVELS default {config.levels}; e.g. ./verify 0, ./verify 0-3 --scale "
        "0.2, ./verify --json)"
    )
    before = f"""levels={shlex.quote(config.levels)}
case "$1" in
  ""|-*) ;;
  *) levels="$1"; shift ;;
esac
set -- --levels "$levels" "$@"
"""
    return entry_script(VERIFY_SCRIPT, usage, command, before)
