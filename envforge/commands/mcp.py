"""`envforge mcp`: the verifier as an MCP server over stdio, for Claude Code, Gemini CLI, Codex."""

from __future__ import annotations

from pathlib import Path

import typer

from envforge.errors import BadInput
from envforge.resolve import resolve
from envforge.sandbox.select import SANDBOX_HELP, choose_sandbox
from envforge.targets import default_target, target_help
from envforge.workspace.write import CONFIG_FILE, WorkspaceConfig, load_config


def mcp_command(
    workspace: Path = typer.Option(
        Path("."), "--workspace", help=f"A folder written by envforge prompt (its {CONFIG_FILE})."
    ),
    env: str = typer.Option(None, "--env", help="Instead of a workspace: the env name..."),
    ref: str = typer.Option(None, "--ref", help="... or its reference,"),
    spec: str = typer.Option(None, "--spec", help="its env.toml (default: beside the reference),"),
    port: Path = typer.Option(None, "--port", help="and the port to verify."),
    target: str = typer.Option(
        default_target(), "--target", help=target_help("Which default port")
    ),
    levels: str = typer.Option("0-3", "--levels", help="Levels verify runs by default."),
    sandbox: str = typer.Option("auto", "--sandbox", help=SANDBOX_HELP),
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
    port: Path | None,
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
