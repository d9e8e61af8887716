"""The host never opens a path the sandboxed side chose.

What the host shows of a port (port lines in findings and the JSON report, repair prompts,
iteration snapshots, ``--out``) comes only from files it listed itself in the port folder
(``envforge/untrusted/port_files.py``). Each test is a hostile port, agent command or planted report that
names a 0600 secret the test made (standing in for ``/etc/shadow``), and checks that its text
reaches none of them. Hostile ports do their work when the sandboxed server imports them, so
no JAX tracing is paid for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import PONG_PORT, ROOT

from envforge.agents.loop import AgentLimits
from envforge.agents.messages import part_to_dict
from envforge.agents.scripted import ScriptedModel, reply
from envforge.cost.prices import user_price
from envforge.mcp.server import REPORT_FILE, VerifierSession
from envforge.sandbox.confine import probe
from envforge.sandbox.docker import docker_available
from envforge.spec import spec_for_name
from envforge.translate.job import TranslateJob, run_translate_job
from envforge.translate.orchestrate import RepairConfig
from envforge.verify.context import VerifyOptions
from envforge.verify.findings import Finding, SourceLocation
from envforge.verify.verdict import LevelResult, Report
from envforge.workspace.write import load_config, write_workspace

DOCKER = pytest.mark.skipif(not docker_available(), reason="no docker engine")
KINDS = ["process", pytest.param("docker", marks=DOCKER)]


def secret_file(folder: Path, name: str = "secret.txt", mode: int = 0o600) -> tuple[Path, str]:
    """A file only its owner may read, whose first line is a marker no port could guess."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = "the-secret-is-" + uuid.uuid4().hex
    path = folder / name
    path.write_text(f"{marker}\nsecond line {marker}\n")
    path.chmod(mode)
    return path, marker


def every_text(folder: Path) -> str:
    """All regular files under ``folder`` (no link followed), as one text."""
    return "".join(
        p.read_text(errors="replace")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    )


# ---- case 4: names in a port's source list and in its exception text ----------------------


def hostile_port(folder: Path, secret: Path) -> Path:
    """The pong port that, on import in the sandboxed server, adds ``secret`` to the source
    files its driver reports and makes ``reset`` raise with a traceback naming the secret (and,
    so that localization is seen to still work, line 1 of its own file)."""
    code = f"""
import envforge.backends.jax as _driver
_own_sources = _driver.JaxDriver.source_files
_driver.JaxDriver.source_files = lambda self: [*_own_sources(self), __import__("pathlib").Path({str(secret)!r})]
def _raising_reset(self, seeds):
    raise RuntimeError('File "' + {str(secret)!r} + '", line 1, in reset\\n  File "' + __file__ + '", line 1')
_driver.JaxDriver.reset = _raising_reset
"""
    future = "from __future__ import annotations\n"
    source = PONG_PORT.read_text()
    folder.mkdir(parents=True)
    (folder / "pong.py").write_text(source.replace(future, future + code.strip() + "\n"))
    return folder


@pytest.mark.parametrize("kind", KINDS)
def test_a_port_naming_a_host_file_gets_none_of_it_into_the_report_or_the_prompt(
    kind: str, tmp_path: Path
) -> None:
    if kind == "process" and not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    secret, marker = secret_file(tmp_path / "private")
    port = hostile_port(tmp_path / "port", secret)
    command = [sys.executable, "-m", "envforge.cli", "verify", "pong", "--port", str(port)]
    command += ["--levels", "0", "--sandbox", kind, "--timeout", "30", "--json"]
    command += ["--repair-prompt", "--no-self-check"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 1, run.stderr[-3000:]
    report = json.loads(run.stderr)  # --repair-prompt: the JSON report on stderr
    [finding] = report["levels"][0]["findings"]
    assert str(secret) in finding["message"]  # the port did name it
    assert marker not in run.stderr and marker not in run.stdout
    # the port's own file, which the host listed, is still shown and localized
    files = {loc["file"] for loc in finding["port_lines"]}
    assert files == {str(port.resolve() / "pong.py")}
    assert "The port as it is now" in run.stdout and "from __future__ import" in run.stdout


# ---- case 5: links an agent's command made in port/ --------------------------------------


def test_translate_refuses_links_an_agent_command_made_and_copies_none(tmp_path: Path) -> None:
    secret, marker = secret_file(tmp_path / "private")
    locked, locked_marker = secret_file(tmp_path / "locked", "inside.py")
    locked.parent.chmod(0o700)
    plant = f"mkdir -p port/lib && ln -s {secret} port/pong.py && ln -s {locked} port/lib/helper.py"
    model = ScriptedModel(
        [reply(calls=[("run_command", {"command": plant})])] + [reply("done")] * 8
    )
    job = TranslateJob(
        spec=spec_for_name("pong"),
        model="scripted",
        config=RepairConfig(
            levels=(0,),
            max_iters=2,
            agent=AgentLimits(max_steps=3, max_tokens=4000),
            verify=VerifyOptions(scale=0.01, sandbox="process", timeout_s=30),
        ),
        budget_usd=Decimal("1"),
        out=tmp_path / "out",
        workspace=tmp_path / "ws",
        ledger=tmp_path / "ledger.sqlite",
        price=user_price("3", "15"),
    )
    outcome = run_translate_job(job, model=model)
    ws = tmp_path / "ws"
    assert (ws / "port" / "pong.py").is_symlink()  # the agent's command did make them
    for folder in (ws / "iterations", tmp_path / "out"):
        text = every_text(folder)
        assert marker not in text and locked_marker not in text, folder
    assert not (ws / "iterations" / "01" / "port" / "pong.py").exists()
    told = [
        json.dumps([part_to_dict(p) for m in request.messages for p in m.parts])
        for request in model.requests
    ]
    assert any("port/pong.py: a symbolic link" in text for text in told)  # the repair prompt
    assert any("port/lib/helper.py: a symbolic link" in text for text in told)
    assert not any(marker in text or locked_marker in text for text in told)
    first = outcome.result.iterations[0]  # refused before any verification
    assert first.verdict == "no port" and "port/pong.py: a symbolic link" in first.finding


# ---- case 9: the MCP server's repair_prompt on a planted report -------------------------


def test_mcp_repair_prompt_shows_no_file_a_planted_report_names(tmp_path: Path) -> None:
    secret, marker = secret_file(tmp_path / "private")
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    session = VerifierSession(load_config(ws), "none")
    port = session.config.port_path()
    (port / "pong.py").symlink_to(secret)  # a port "file" that is a link to the secret
    named = [str(secret), str(port / "pong.py"), str(tmp_path / "private/../private/secret.txt")]
    finding = Finding(
        level=1,
        check="step.mismatch",
        message="one step differs in ball_vy",
        fields=["ball_vy"],
        port_lines=[SourceLocation(name, 1, "ball_vy = -ball_vy") for name in named],
    )
    report = Report("pong", "pong.c", str(port), [LevelResult(1, "fail", "", [finding])], [1])
    (ws / REPORT_FILE).parent.mkdir(exist_ok=True)
    (ws / REPORT_FILE).write_text(json.dumps(report.to_dict()))
    prompt = session.repair_prompt()
    assert "one step differs in ball_vy" in prompt  # the planted report was read
    assert marker not in prompt
    assert (port / "pong.py").is_symlink()
