"""A workspace is its agent's: nothing it writes there runs, or is read back, on the host.

Each test is a hostile agent's edit of a workspace ``envforge prompt`` (or ``rules draft``)
wrote: a module named like one envforge imports, planted where the entry points start
(``./verify``, ``./bench``, ``./profile``, ``./check``, the MCP server as ``.mcp.json`` starts it);
a reference copy given a C constructor; a spec copy swapped for a link to a 0600 file (standing
in for a root-only secret). No test here builds or verifies a port: refusals come first.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import anyio
import pytest

from envforge.errors import BadInput
from envforge.mcp.server import VerifierSession
from envforge.spec import spec_for_name
from envforge.workspace.optimize_workspace import write_optimize_workspace
from envforge.workspace.pinned import WorkspaceEdited
from envforge.workspace.write import CONFIG_FILE, load_config, write_workspace

PLANTED = ("argparse", "json", "typer", "enum", "typing")
"""Modules envforge's command line imports before it parses an argument."""


def secret_file(folder: Path) -> tuple[Path, str]:
    folder.mkdir(parents=True, exist_ok=True)
    marker = "the-secret-is-" + uuid.uuid4().hex
    path = folder / "secret.txt"
    path.write_text(marker + "\n")
    path.chmod(0o600)
    return path, marker


def plant_modules(folder: Path, record: Path) -> None:
    """Modules that, imported by the host, append their name to ``record`` and stop it."""
    for name in PLANTED:
        (folder / f"{name}.py").write_text(
            f"open({str(record)!r}, 'a').write({name!r} + '\\n')\n"
            f"raise SystemExit('the planted {name}.py was imported')\n"
        )


def _run(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # ignored by an isolated interpreter too
    return subprocess.run(
        [str(script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


# ---- the workspace on no import path (scripts, MCP configs) ---------------------------------


def test_workspace_scripts_never_import_a_module_planted_in_the_workspace(tmp_path: Path) -> None:
    from envforge.rules.draft_workspace import write_draft_workspace
    from envforge.rules.text import RulesText

    record = tmp_path / "imported.txt"
    ws = write_optimize_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    rules_md = tmp_path / "RULES.md"
    rules_md.write_text("# Duel\n\nEach player draws a card.\n")
    drafts = write_draft_workspace(RulesText.load(rules_md), "duel", tmp_path / "draft", None, None)
    for folder in (ws, ws / "port", drafts):
        plant_modules(folder, record)
    (drafts / "env.toml").write_text("")
    (drafts / "cases.toml").write_text("")
    for script, folder in ((ws / "verify", ws), (ws / "bench", ws), (ws / "profile", ws),
                           (drafts / "check", drafts), (ws / "verify", ws / "port")):  # fmt: skip
        run = _run(script, "--help", cwd=folder)
        assert run.returncode == 0, (script, run.stderr[-2000:])
        assert "Usage:" in run.stdout, script
    assert not record.exists(), record.read_text()
    text = (ws / "verify").read_text()
    assert " -I -m envforge.cli verify --workspace" in text and "cd " not in text


def test_the_mcp_server_started_as_the_configs_say_imports_nothing_from_the_workspace(
    tmp_path: Path,
) -> None:
    import tomllib

    from mcp import Client, StdioServerParameters

    record = tmp_path / "imported.txt"
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    plant_modules(ws, record)
    configured = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["envforge"]
    gemini = json.loads((ws / ".gemini/settings.json").read_text())["mcpServers"]["envforge"]
    codex = tomllib.loads((ws / ".codex/config.toml").read_text())["mcp_servers"]["envforge"]
    for other in (gemini, codex):
        assert (other["command"], other["args"]) == (configured["command"], configured["args"])
    assert configured["args"][0] == "-I" and Path(configured["command"]).is_absolute()
    cache = (
        {"ENVFORGE_CACHE": os.environ["ENVFORGE_CACHE"]} if "ENVFORGE_CACHE" in os.environ else {}
    )
    server = StdioServerParameters(
        command=configured["command"],
        args=[*configured["args"], "--sandbox", "none"],
        env={"PYTHONPATH": str(ws), "JAX_PLATFORMS": "cpu", **cache},
        cwd=str(ws),  # an agent CLI starts it in the workspace
    )

    async def spec_tool() -> str:
        async with Client(server, read_timeout_seconds=120) as client:
            result = await client.call_tool("spec", {})
            return result.content[0].text  # type: ignore[union-attr]

    assert 'name = "pong"' in anyio.run(spec_tool)
    assert not record.exists(), record.read_text()


# ---- the reference is the real one, recorded outside the workspace --------------------------

CONSTRUCTOR = """
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {{
    FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("ran on the host", f); fclose(f); }}
}}
"""


def test_an_edited_reference_copy_is_refused_before_anything_builds(tmp_path: Path) -> None:
    marker = tmp_path / "constructor-ran.txt"
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    session = VerifierSession(load_config(ws), "none")
    assert session.spec.root == spec_for_name("pong").root  # the real reference
    pong_c = ws / "reference" / "pong.c"
    pong_c.write_text(CONSTRUCTOR.format(marker=marker) + pong_c.read_text())
    for answer in (session.verify("0", 0.05), session.bench(8), session.reference_text()):
        assert answer.startswith("error: the workspace's reference was changed "
                                 "(reference/pong.c: edited)"), answer  # fmt: skip
        assert "\n" not in answer.strip()
    for sandbox in ("docker", "process"):
        run = _run(ws / "verify", "0", "--scale", "0.05", "--sandbox", sandbox, cwd=ws)
        assert run.returncode == 2, run.stderr[-2000:]
        assert run.stderr.startswith("envforge: error: the workspace's reference was changed")
        assert len(run.stderr.strip().splitlines()) == 1
    with pytest.raises(WorkspaceEdited, match="reference/pong.c: edited"):
        load_config(ws)  # `envforge mcp --workspace` does not start on it either
    assert not marker.exists()


def test_the_workspace_config_and_added_files_do_not_choose_the_reference(tmp_path: Path) -> None:
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "env.toml").write_text('name = "pong"\n')
    config_text = (ws / CONFIG_FILE).read_text()
    (ws / CONFIG_FILE).write_text(config_text.replace("reference/env.toml", str(tmp_path / "mine")))
    config = load_config(ws)
    assert config.spec_path() == spec_for_name("pong").root / "env.toml"
    assert config.reference == str(spec_for_name("pong").root / "pong.c")
    (ws / "reference" / "helper.py").write_text("import os\n")
    with pytest.raises(WorkspaceEdited, match="reference/helper.py: added"):
        load_config(ws)
    other = tmp_path / "other"
    other.mkdir()
    (other / CONFIG_FILE).write_text(config_text)  # a workspace envforge never wrote
    with pytest.raises(BadInput, match="no record of writing this workspace"):
        load_config(other)


def test_mcp_spec_and_reference_read_no_link_the_agent_made(tmp_path: Path) -> None:
    secret, told = secret_file(tmp_path / "private")
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    session = VerifierSession(load_config(ws), "none")
    assert 'name = "pong"' in session.spec_text()
    assert "### references/pong/pong.c" not in session.reference_text()
    assert "### reference/pong.c" in session.reference_text()
    for part in ("env.toml", "pong.c"):
        (ws / "reference" / part).unlink()
        (ws / "reference" / part).symlink_to(secret)
        for answer in (session.spec_text(), session.reference_text()):
            assert told not in answer
            assert answer.startswith("error: the workspace's reference was changed"), answer
            assert "a symbolic link" in answer
