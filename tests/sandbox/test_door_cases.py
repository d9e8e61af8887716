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
from conftest import PONG_PORT
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
