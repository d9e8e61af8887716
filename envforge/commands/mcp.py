"""`envforge mcp`: the verifier as an MCP server over stdio, for Claude Code, Gemini CLI, Codex."""

from __future__ import annotations

from pathlib import Path

import typer

from envforge.commands import options
from envforge.errors import BadInput
from envforge.resolve import resolve
from envforge.sandbox.select import choose_sandbox
from envforge.targets import default_target
from envforge.verify.levels import DEFAULT_LEVELS
from envforge.workspace.write import CONFIG_FILE, WorkspaceConfig, load_config


def mcp_command(
    workspace: Path = typer.Option(
        Path("."), "--workspace", help=f"A folder written by envforge prompt (its {CONFIG_FILE})."
    ),
    env: str = typer.Option(None, "--env", help="Instead of a workspace: the env name, or --ref."),
    ref: options.Ref = None,
    spec: options.Spec = None,
    port: options.Port = None,
    target: options.Target = default_target(),
    levels: options.Levels = DEFAULT_LEVELS,
    sandbox: options.Sandbox = "auto",
) -> None:
    """Serve envforge's verifier over MCP (stdio): verify, repair_prompt, latest_report, spec,
    reference, bench. See docs/AGENTS.md for each agent CLI's one-line config."""
    config = _config(workspace, env, ref, spec, port, target, levels)
    kind = choose_sandbox(sandbox).kind
    try:
        from envforge.mcp.server import VerifierSession, build_server

        server = build_server(VerifierSession(config, kind))
    except ModuleNotFoundError as e:
        raise BadInput(f"envforge mcp needs the MCP SDK ({e}): pip install 'mcp>=2'") from None
    server.run("stdio")


def _config(
    workspace: Path,
    env: str | None,
    ref: str | None,
    spec: str | None,
    port: str | None,
    target: str,
    levels: str,
) -> WorkspaceConfig:
    if env is None and ref is None:
        if port is not None:
            raise BadInput("--port needs --env or --ref (or use --workspace)")
        return load_config(workspace)
    resolved = resolve(env, ref, spec, port, target)
    env_spec = resolved.spec
    root = workspace.resolve()
    return WorkspaceConfig(
        root=root,
        env=env_spec.name,
        target=target,
        spec=str((env_spec.root / "env.toml").resolve()),
        reference=env_spec.reference,
        port=str(resolved.port.resolve()),
        levels=levels,
    )


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)
