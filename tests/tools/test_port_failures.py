"""A port that fails to build is a verdict on the port (exit 1, with what it said), wherever it
is built: ``rules check --port`` and ``envforge profile --port`` called it bad input (exit 2),
and ``rules compare`` called a failure of version 2 a reference error."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PONG_PORT, ROOT, run_cli

from envforge.sandbox.confine import probe

TEN = ROOT / "tests" / "rules" / "ten"
BROKEN = 'raise RuntimeError("this port does not build")\n'


@pytest.fixture
def process_sandbox() -> None:
    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")


def broken_copy(source: Path, folder: Path, after: str) -> Path:
    """``source`` copied into ``folder`` with a raise right after the line ``after``."""
    folder.mkdir(parents=True)
    text = source.read_text()
    assert text.count(after) == 1
    (folder / source.name).write_text(text.replace(after, after + BROKEN))
    return folder


def assert_port_failed(code: int, out: str, err: str) -> None:
    assert code == 1, (code, out, err[-2000:])
    assert "Traceback (most recent" not in err.splitlines()[0]
    assert err.startswith("envforge: the port failed: port "), err
    assert "this port does not build" in err and "envforge: error:" not in err


@pytest.mark.usefixtures("process_sandbox")
def test_rules_check_on_a_port_that_fails_to_build_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ten = TEN / "jax_bust_ends" / "ten.py"  # raised before the port imports jax
    port = broken_copy(ten, tmp_path / "port", "from typing import NamedTuple\n")
    code, out, err = run_cli(
        ["rules", "check", str(TEN / "RULES.md"), "--cases", str(TEN / "cases.toml"),
         "--spec", str(TEN / "env.toml"), "--port", str(port), "--sandbox", "process"],
        capsys,
    )  # fmt: skip
    assert_port_failed(code, out, err)


@pytest.mark.usefixtures("process_sandbox")
def test_profile_of_a_port_that_fails_to_build_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = broken_copy(PONG_PORT, tmp_path / "port", "from __future__ import annotations\n")
    code, out, err = run_cli(
        ["profile", "pong", "--port", str(port), "--batch", "4", "--sandbox", "process"], capsys
    )
    assert_port_failed(code, out, err)


@pytest.mark.usefixtures("process_sandbox")
def test_rules_compare_names_the_version_that_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Version 2 does not import: the comparison says v2 failed (exit 1), not that the
    reference did (exit 2)."""
    v2 = broken_copy(TEN / "v2.py", tmp_path / "mine", "import numpy as np\n") / "v2.py"
    code, out, err = run_cli(
        ["rules", "compare", str(TEN / "RULES.md"), f"{TEN / 'v1.py'}:Ten", f"{v2}:Ten",
         "--spec", str(TEN / "env.toml"), "--levels", "0", "--sandbox", "process",
         "--questions", str(tmp_path / "questions.md")],
        capsys,
    )  # fmt: skip
    assert code == 1, (code, out, err[-2000:])
    assert "reference" not in out, out
    assert "vs v2 (mine/v2.py): error" in out, out
    assert "L0: v2 (mine/v2.py) failed: v2 (mine/v2.py) build" in out, out
    assert "this port does not build" in out


def test_rules_compare_help_says_where_each_version_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(["rules", "compare", "--help"], capsys)
    said = " ".join(out.replace("│", " ").split())
    assert code == 0
    assert "version 1 is the reference side and runs on the host" in said, said
    assert "outside any sandbox" in said and "runs in the sandbox --sandbox names" in said


def test_train_on_a_port_that_does_not_import_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``envforge train`` imports the port in this process (as documented): a port whose
    import raises is a verdict on it, not a traceback."""
    port = broken_copy(PONG_PORT, tmp_path / "port", "from __future__ import annotations\n")
    args = ["train", "--port", str(port), "--env", "pong", "--eval-episodes", "0"]
    code, out, err = run_cli(args, capsys)
    assert_port_failed(code, out, err)
