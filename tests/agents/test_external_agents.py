"""envforge for agents it does not run: `envforge prompt` writes a workspace whose ./verify
runs the verifier and ends with the next repair prompt; `verify --repair-prompt` renders it
from a report; `envforge mcp` serves the verifier over stdio, driven here by the MCP SDK's own
client on a broken pong port.

Verifications here stop at L0 (a missing function, a missing clip that L0's bounds check
localizes), at a twentieth of the default scale and without a sandbox: they are about the
plumbing, and test_verify_pong covers what each level catches.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from conftest import PONG_PORT, ROOT, apply_patch

from envforge.commands.verify import rerun_command
from envforge.errors import BadInput
from envforge.spec import load_spec, spec_for_name
from envforge.verify.findings import Finding, SourceLocation
from envforge.verify.verdict import LevelResult, Report
from envforge.workspace.next_prompt import next_repair_prompt
from envforge.workspace.write import CONFIG_FILE, TASK_FILES, load_config, write_workspace

MCP_TOOLS = {"verify", "repair_prompt", "latest_report", "spec", "reference", "bench"}


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}


def _cache() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("ENVFORGE_CACHE", "HOME")}


def _envforge(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "envforge.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=_environment(), capture_output=True, text=True)


def test_prompt_writes_a_workspace_whose_verify_ends_with_the_repair_prompt(
    tmp_path: Path,
) -> None:
    made = _envforge("prompt", "pong", "--target", "jax", "--out", "ws", "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    ws = tmp_path / "ws"
    assert json.loads(made.stdout)["workspace"] == str(ws.resolve())
    task = (ws / "AGENTS.md").read_text()
    assert all((ws / name).read_text() == task for name in TASK_FILES)
    assert "Write the port to `port/pong.py`" in task and "`./verify 0-3`" in task
    assert "### reference/pong.c" in task and "## The env spec (reference/env.toml)" in task
    assert "run_verify" not in task  # envforge's own tool; this agent has ./verify
    assert (ws / "reference" / "pong.c").read_text() == (
        ROOT / "references/pong/pong.c"
    ).read_text()
    assert load_config(ws).reference == str(ROOT / "references/pong/pong.c")  # the real one

    # a port without from_canonical: L0 fails at import, and the entry point says what to fix
    source = PONG_PORT.read_text().replace("def from_canonical(", "def from_fields(")
    (ws / "port" / "pong.py").write_text(source)
    run = subprocess.run(
        [str(ws / "verify"), "0", "--scale", "0.05", "--sandbox", "none"],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    assert "verdict: not equivalent" in run.stderr  # the report, on stderr
    prompt = run.stdout
    assert prompt.startswith("The verifier ran on your port and found")
    assert "### L0 contract" in prompt and "from_canonical" in prompt
    assert "`./verify 0`" in prompt  # how to rerun, as this agent does
    assert "def from_fields(" in prompt  # the port's listing, numbered
    assert str(tmp_path) not in prompt and str(ROOT) not in prompt


def test_workspaces_for_rust_and_for_a_gymnasium_reference(tmp_path: Path) -> None:
    rust = write_workspace(spec_for_name("pong"), "rust", tmp_path / "rust")
    task = (rust.root / "CLAUDE.md").read_text()
    assert '[lib]\nname = "pong_rust"' in task and "`./verify 0-3`" in task
    assert rust.port == "port" and (rust.root / "port").is_dir()
    gemini = json.loads((rust.root / ".gemini" / "settings.json").read_text())
    assert gemini["mcpServers"]["envforge"]["args"][-3:] == ["mcp", "--workspace", str(rust.root)]
    codex = tomllib.loads((rust.root / ".codex" / "config.toml").read_text())
    assert codex["mcp_servers"]["envforge"]["command"] == sys.executable
    gym = write_workspace(spec_for_name("cartpole"), "jax", tmp_path / "gym")
    assert gym.reference == "gymnasium:CartPole-v1"
    copied = (gym.root / "reference" / "cartpole_gymnasium.py").read_text()
    assert "class CartPoleEnv" in copied and "pygame" not in copied
    (gym.root / "port" / "cartpole.py").write_text("# the agent's port\n")
    write_workspace(spec_for_name("cartpole"), "jax", tmp_path / "gym")  # written again
    assert (gym.root / "port" / "cartpole.py").read_text() == "# the agent's port\n"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    made = _envforge("prompt", "pong", "--out", str(tmp_path / "other"), cwd=tmp_path)
    assert made.returncode == 2 and "not an envforge workspace" in made.stderr
    assert not (tmp_path / "other" / CONFIG_FILE).exists()


def test_repair_prompt_from_a_report_read_back_from_json(tmp_path: Path) -> None:
    port = tmp_path / "port"
    port.mkdir()
    (port / "pong.py").write_text("a = 1\nball_vy = -ball_vy\n")
    finding = Finding(
        level=1,
        check="step.mismatch",
        message="one step differs in ball_vy",
        fields=["ball_vy"],
        expected={"ball_vy": 2.0},
        actual={"ball_vy": -2.0},
        port_lines=[SourceLocation(str(port / "pong.py"), 2, "ball_vy = -ball_vy")],
    )
    report = Report("pong", "pong.c", str(port), [LevelResult(0, "pass"), LevelResult(1, "fail", "", [finding])], [0, 1])  # fmt: skip
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.to_dict() == report.to_dict()
    rerun = "envforge verify pong --port port --levels {levels}"
    text = next_repair_prompt(again, spec_for_name("pong"), port, "0-1", rerun, [tmp_path])
    assert "ball_vy: expected 2.0, got -2.0" in text and "pong.py:2: ball_vy = -ball_vy" in text
    assert "2  ball_vy = -ball_vy" in text  # the listing of the file the finding points into
    assert "`envforge verify pong --port port --levels 0-1`" in text
    assert rerun_command("pong", None, None, "port", "jax") == rerun  # verify's default
    assert rerun_command(None, "gymnasium:CartPole-v1", None, None, "rust") == (
        "envforge verify --ref gymnasium:CartPole-v1 --target rust --levels {levels}"
    )
    passed = Report("pong", "pong.c", str(port), [LevelResult(n, "pass") for n in range(4)])
    passed.requested = [0, 1, 2, 3]
    assert "nothing to repair" in next_repair_prompt(
        passed, spec_for_name("pong"), port, "0-3", rerun, []
    )
    at_zero = Report("pong", "pong.c", str(port), [LevelResult(0, "pass")], [0])
    assert "levels 1-3 not run yet" in next_repair_prompt(  # not done: says what remains
        at_zero, spec_for_name("pong"), port, "0", rerun, []
    )


def test_mcp_server_over_stdio_verifies_a_broken_port_and_localizes_it(tmp_path: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("the pong reference needs a C compiler")
    from mcp import Client, StdioServerParameters

    bug = "paddle_yr = jnp.clip(state.paddle_yr + move, f32(0.0), HEIGHT - PADDLE_H)"
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    broken = apply_patch(PONG_PORT, ws / "port", (bug, "paddle_yr = state.paddle_yr + move"))
    (line,) = broken.lines
    # started as the workspace's .mcp.json says (Claude Code's project config)
    configured = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["envforge"]
    server = StdioServerParameters(
        command=configured["command"],
        args=[*configured["args"], "--sandbox", "none"],
        env={"JAX_PLATFORMS": "cpu", **_cache()},  # envforge's record of the workspace
        cwd=str(tmp_path),
    )

    async def session() -> dict[str, str]:
        async with Client(server, read_timeout_seconds=600) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            texts = {"tools": ",".join(sorted(names))}
            before = await client.call_tool("repair_prompt", {})
            texts["before"] = before.content[0].text  # type: ignore[union-attr]
            for name, args in (
                ("verify", {"levels": "0-1", "scale": 0.05}),
                ("repair_prompt", {}),
                ("latest_report", {}),
                ("spec", {}),
                ("bench", {"batch_size": 0}),
            ):
                result = await client.call_tool(name, args)
                assert not result.is_error, result
                texts[name] = result.content[0].text  # type: ignore[union-attr]
            return texts

    texts = anyio.run(session)
    assert set(texts["tools"].split(",")) == MCP_TOOLS
    assert "call verify first" in texts["before"]
    verdict = texts["verify"]
    assert verdict.startswith("verdict: not equivalent") and "contract.obs_bounds" in verdict
    assert "Fields that differ: paddle_yr" in verdict
    assert f"port/pong.py:{line}: paddle_yr = state.paddle_yr + move" in verdict  # localized
    assert "reference/pong.c:111: env->paddle_yr = clampf(" in verdict
    repair = texts["repair_prompt"]
    assert f"pong.py:{line}: paddle_yr = state.paddle_yr + move" in repair
    assert f"{line}  " in repair and '`verify(levels="0-1")`' in repair
    assert json.loads(texts["latest_report"])["verdict"] == "not equivalent"
    assert 'name = "pong"' in texts["spec"]
    assert texts["bench"] == "error: batch_size must be positive"
    assert (ws / ".envforge" / "last-report.json").is_file()


def test_mcp_serves_any_port_without_a_workspace(tmp_path: Path) -> None:
    from envforge.commands.mcp import _config
    from envforge.mcp.server import VerifierSession

    config = _config(tmp_path, "pong", None, None, PONG_PORT, "jax", "0-1")
    assert (
        config.port_path() == PONG_PORT and config.spec_path() == ROOT / "references/pong/env.toml"
    )
    session = VerifierSession(config, "none")
    assert "env->ball_vy" in session.reference_text() and 'name = "pong"' in session.spec_text()
    assert session.verify("7", 1.0).startswith("error: --levels")  # one line for the agent
    assert session.repair_prompt() == "No report yet: call verify first."


def test_a_reference_outside_its_spec_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    shutil.copy(ROOT / "references/pong/pong.c", tmp_path / "src" / "pong.c")
    (tmp_path / "spec").mkdir()
    toml = (ROOT / "references/pong/env.toml").read_text()
    (tmp_path / "spec" / "env.toml").write_text(toml.replace('"pong.c"', '"../src/pong.c"', 1))
    with pytest.raises(BadInput, match="outside"):
        write_workspace(load_spec(tmp_path / "spec"), "jax", tmp_path / "ws")
