"""The surfaces beside a workspace go through the door too: ``envforge mutate`` verifies each
mutant and the differential in the chosen sandbox; every file a port, an agent or a workspace
could have shaped is copied or read by one rule (``envforge/untrusted/``), links refused at
the source and at the destination.

Each test is a hostile port, agent command or folder that reaches for a 0600 file the test
made (standing in for a root-only secret) and checks that neither its text nor a marker
reaches the host.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from conftest import PONG_PORT, run_cli
from typer.testing import CliRunner

from envforge.cli import app
from envforge.sandbox.confine import probe


def secret_file(folder: Path) -> tuple[Path, str]:
    folder.mkdir(parents=True, exist_ok=True)
    marker = "the-secret-is-" + uuid.uuid4().hex
    path = folder / "secret.txt"
    path.write_text(marker + "\n")
    path.chmod(0o600)
    return path, marker


def hostile_pong(folder: Path, secret: Path, marker: Path, then: str = "pass") -> Path:
    """The pong JAX port reading ``secret`` and writing ``marker`` at import, then ``then``."""
    future = "from __future__ import annotations\n"
    code = f"""
try:
    _leak = open({str(secret)!r}).read().strip()
except OSError as _e:
    _leak = "unreadable: " + type(_e).__name__
try:
    open({str(marker)!r}, "w").write(_leak)
except OSError:
    pass
{then}
"""
    folder.mkdir(parents=True, exist_ok=True)
    source = PONG_PORT.read_text().replace(future, future + code.strip() + "\n", 1)
    (folder / "pong.py").write_text(source)
    return folder


def _mutate(port: Path, *more: str) -> dict:
    args = ["mutate", "pong", "--target", "jax", "--port", str(port), "--levels", "0"]
    args += ["--sandbox", "process", "--seed-sweep", "0", "--jobs", "1", "--json", *more]
    run = CliRunner().invoke(app, args)
    assert run.exit_code in (0, 1), run.output[-3000:]
    return json.loads(run.stdout[run.stdout.index("{") :])


# ---- mutate: every mutant and the differential through the door ------------------------------


def test_mutate_verifies_each_mutant_in_the_chosen_sandbox(tmp_path: Path) -> None:
    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    secret, told = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    then = 'raise RuntimeError("imported: " + _leak)'  # each mutant stops at import: cheap
    report = _mutate(hostile_pong(tmp_path / "port", secret, marker, then), "--max", "2")
    assert report["options"]["sandbox"] == "process" and len(report["mutants"]) == 2
    for mutant in report["mutants"]:
        assert "imported: unreadable" in mutant["error"], mutant  # it ran, where no secret was
    assert told not in json.dumps(report)
    assert not marker.exists()


@pytest.mark.slow  # two JAX verifies and a differential in the sandbox: about a minute of CPU
def test_mutate_runs_the_differential_in_the_chosen_sandbox(tmp_path: Path) -> None:
    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    secret, told = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    report = _mutate(hostile_pong(tmp_path / "port", secret, marker), "--max", "1")
    [mutant] = report["mutants"]
    assert mutant["status"] not in ("stillborn", "error"), mutant
    assert mutant["equivalence"] is not None or mutant["affected"], mutant  # the differential ran
    assert told not in json.dumps(report)
    assert not marker.exists()


# ---- translate --workspace, run again: nothing written through a link run 1 left -------------


def test_a_second_translate_run_writes_no_reference_copy_through_a_planted_link(
    tmp_path: Path,
) -> None:
    from decimal import Decimal

    from envforge.agents.loop import AgentLimits
    from envforge.agents.scripted import ScriptedModel, reply
    from envforge.cost.prices import user_price
    from envforge.spec import spec_for_name
    from envforge.translate.job import TranslateJob, run_translate_job
    from envforge.translate.orchestrate import RepairConfig
    from envforge.verify.context import VerifyOptions

    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    secret, told = secret_file(tmp_path / "private")
    plant = (
        f"ln -sf {secret} reference/pong.c && rm -rf iterations && ln -s {secret.parent} iterations"
    )
    ws = tmp_path / "ws"
    for number, calls in ((1, [("run_command", {"command": plant})]), (2, [])):
        model = ScriptedModel([reply(calls=calls)] + [reply("done")] * 4)
        job = TranslateJob(
            spec=spec_for_name("pong"),
            model="scripted",
            config=RepairConfig(
                levels=(0,),
                max_iters=1,
                agent=AgentLimits(max_steps=2, max_tokens=4000),
                verify=VerifyOptions(scale=0.01, sandbox="process", timeout_s=30),
            ),
            budget_usd=Decimal("1"),
            out=tmp_path / f"out{number}",
            workspace=ws,
            ledger=tmp_path / "ledger.sqlite",
            price=user_price("3", "15"),
        )
        run_translate_job(job, model=model)
        if number == 1:
            assert (ws / "reference" / "pong.c").is_symlink()  # the agent's command made it
    assert secret.read_text() == told + "\n" and secret.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in secret.parent.iterdir()] == ["secret.txt"]  # no transcript there
    assert (ws / "iterations" / "01" / "transcript.jsonl").is_file()
    copy = ws / "reference" / "pong.c"
    assert not copy.is_symlink() and copy.read_text() == spec_for_name("pong").reference_path().read_text()  # fmt: skip


# ---- library_modules: found without importing, never a file from the working folder ---------


def _spec_with_library(folder: Path, modules: str) -> Path:
    import re

    from conftest import ROOT

    folder.mkdir(parents=True)
    for name in ("uno.py", "README.md"):
        (folder / name).write_text((ROOT / "references/uno" / name).read_text())
    toml = (ROOT / "references/uno/env.toml").read_text()
    toml = re.sub(r"library_modules = \[[^\]]*\]", f"library_modules = {modules}", toml)
    (folder / "env.toml").write_text(toml)
    return folder / "env.toml"


def test_library_modules_are_found_without_importing_anything(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import sys

    from envforge.errors import BadInput
    from envforge.prompts.sources import reference_sources
    from envforge.spec import load_spec, spec_for_name

    spec = load_spec(_spec_with_library(tmp_path / "uno", '["this.x"]'))
    assert "this" not in sys.modules
    with pytest.raises(BadInput, match=r"library_modules: this\.x is not an installed"):
        reference_sources(spec)
    assert "this" not in sys.modules and "Beautiful is better" not in capfd.readouterr().out
    # the shipped UNO spec's modules are still found, as files of the installed rlcard
    shipped = [s.library for s in reference_sources(spec_for_name("uno")) if s.library]
    assert shipped[:2] == ["library/rlcard/envs/uno.py", "library/rlcard/games/uno/game.py"]


def test_a_module_in_the_working_folder_is_not_library_code(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    secret, told = secret_file(tmp_path / "private")
    spec = _spec_with_library(tmp_path / "uno", '["hostsecret"]')
    here = tmp_path / "here"
    here.mkdir()
    (here / "hostsecret.py").symlink_to(secret)
    run = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "prompt", "--spec", str(spec), "--out", "ws"],
        cwd=here, env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert "hostsecret is not an installed Python module" in run.stderr
    written = "".join(
        p.read_text(errors="replace") for p in here.rglob("*") if p.is_file() and not p.is_symlink()
    )
    assert told not in written + run.stdout + run.stderr


# ---- prompt --optimize --port, rules draft --from: only regular files are carried in --------


def test_prompt_optimize_copies_no_link_of_the_port_into_the_workspace(tmp_path: Path) -> None:
    from envforge.errors import BadInput
    from envforge.spec import spec_for_name
    from envforge.workspace.optimize_workspace import write_optimize_workspace

    secret, told = secret_file(tmp_path / "private")
    locked, locked_told = secret_file(tmp_path / "locked")
    locked.parent.chmod(0o700)
    (tmp_path / ".env.local").write_text("API_KEY=" + told)
    port = tmp_path / "port"
    port.mkdir()
    (port / "pong.py").write_text(PONG_PORT.read_text())
    (port / "notes.txt").symlink_to(secret)
    (port / "locked").symlink_to(locked.parent)
    (port / ".env.local").symlink_to(tmp_path / ".env.local")
    with pytest.raises(BadInput, match="a symbolic link") as refused:
        write_optimize_workspace(spec_for_name("pong"), "jax", tmp_path / "ws", port=str(port))
    assert "port/notes.txt" in str(refused.value) and "port/.env.local" in str(refused.value)
    written = "".join(
        p.read_text(errors="replace") for p in (tmp_path / "ws").rglob("*") if p.is_file()
    )
    assert told not in written and locked_told not in written


def test_rules_draft_carries_no_link_from_the_version_folder(tmp_path: Path) -> None:
    from envforge.errors import BadInput
    from envforge.rules.draft_workspace import write_draft_workspace
    from envforge.rules.text import RulesText

    secret, told = secret_file(tmp_path / "private")
    rules = tmp_path / "RULES.md"
    rules.write_text("# Duel\n\nEach player draws a card.\n")
    version = tmp_path / "v1"
    version.mkdir()
    (version / "duel.py").write_text("class Duel: pass\n")
    (version / "cases.toml").symlink_to(secret)
    draft = tmp_path / "draft"
    with pytest.raises(BadInput, match=r"--from .*cases\.toml: a symbolic link"):
        write_draft_workspace(RulesText.load(rules), "duel", draft, None, None, start=version)
    (version / "cases.toml").unlink()
    (version / "duel.py").unlink()
    (version / "duel.py").symlink_to(secret)
    with pytest.raises(BadInput, match=r"--from .*duel\.py: a symbolic link"):
        write_draft_workspace(RulesText.load(rules), "duel", draft, None, None, start=version)
    written = "".join(p.read_text() for p in draft.rglob("*") if p.is_file()) if draft.exists() else ""  # fmt: skip
    assert told not in written


def test_mutate_refuses_a_port_folder_with_a_link_before_copying_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret, told = secret_file(tmp_path / "private")
    port = tmp_path / "port"
    port.mkdir()
    (port / "pong.py").write_text(PONG_PORT.read_text())
    (port / "notes.txt").symlink_to(secret)  # each mutant's copy would hold the secret
    args = ["mutate", "pong", "--target", "jax", "--port", str(port), "--max", "1"]
    code, out, err = run_cli([*args, "--sandbox", "none"], capsys)
    assert code == 2, err[-2000:]
    assert err.startswith("envforge: error: mutate: ") and len(err.strip().splitlines()) == 1
    assert "notes.txt: a symbolic link" in err and told not in out + err


# ---- the agent's file tools: no FIFO an agent made blocks the host ----------------------------


def test_agent_file_tools_do_not_block_on_a_fifo(tmp_path: Path) -> None:
    import os

    from envforge.agents.messages import ToolCall
    from envforge.agents.tools import WorkspaceTools

    ws = tmp_path / "ws"
    (ws / "port").mkdir(parents=True)
    os.mkfifo(ws / "port" / "pipe.py")  # as an agent's `mkfifo` in run_command leaves it
    tools = WorkspaceTools(ws)

    def call(name: str, **arguments: str) -> tuple[str, bool]:
        result = tools.execute(ToolCall("1", name, arguments))
        return result.content, result.is_error

    for name, more in (("read_file", {}), ("edit_file", {"old": "a", "new": "b"})):
        text, failed = call(name, path="port/pipe.py", **more)
        assert failed, text
    text, failed = call("write_file", path="port/pipe.py", content="x = 1\n")  # blocked before
    assert not failed and (ws / "port" / "pipe.py").read_text() == "x = 1\n"  # replaced
