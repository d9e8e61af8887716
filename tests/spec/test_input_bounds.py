"""Inputs bounded before they run: a spec's expressions (their constants' cost, and a deadline
on each evaluation), every TOML reader's nesting, and the shapes a spec declares. Each is bad
input: one line, exit code 2, refused when the spec loads or the file is read, never a hang,
a RecursionError or a MemoryError traceback."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import PONG_SPEC, ROOT, run_cli

from envforge.errors import SpecError
from envforge.spec import load_spec
from envforge.spec.expr import ExprError, Expression, ExpressionTimeout, evaluation_deadline
from envforge.verify import runner
from envforge.verify.context import VerifyOptions

COSTLY = "(abs(after.ball_vy) >= 10.0) & (9**9**9 > 0)"
NAMES: dict[str, set[str] | None] = {"after": {"x"}, "obs": None}


def pong_with(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the pong spec (and its reference) with one exact edit."""
    folder = tmp_path / "ref"
    folder.mkdir()
    shutil.copy(PONG_SPEC.parent / "pong.c", folder / "pong.c")
    text = PONG_SPEC.read_text()
    assert text.count(old) == 1
    (folder / "env.toml").write_text(text.replace(old, new))
    return folder


def assert_one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2 and "Traceback" not in err, (code, err[-2000:])
    [line] = err.strip().splitlines()
    assert line.startswith("envforge: error: ")
    for needle in needles:
        assert needle in line, line
    return line


def test_a_costly_expression_is_refused_when_the_spec_loads_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``9**9**9`` ran on the host with no deadline: ``verify --levels 3 --timeout 30`` never
    returned. Now the spec does not load, and the error names the file's line."""
    folder = pong_with(tmp_path, 'expr = "abs(after.ball_vy) >= 10.0"', f'expr = "{COSTLY}"')
    line = 1 + (folder / "env.toml").read_text().splitlines().index(f'expr = "{COSTLY}"')
    with pytest.raises(SpecError, match="wider than the 64 bits") as refused:
        load_spec(folder)
    assert f"env.toml:{line}: key 'event[" in str(refused.value)
    code, _, err = run_cli(
        ["verify", "--ref", str(folder / "pong.c"), "--levels", "3", "--timeout", "30"], capsys
    )
    assert_one_line(code, err, f"env.toml:{line}", "9 ** 387420489")


@pytest.mark.parametrize(
    "source",
    [
        "9**9**9",
        "after.x ** 10**30",  # a constant part inside an expression over the state
        "2**64",
        "(0,) * 10**9",  # a sequence repeated, not a number
        "(0, 1)[0:2] * 3",
        "'a' * 3",
        "10.0 ** 400",
        "where(obs > 0, 1, 1/0)",
        "-" * 3000 + "obs",
        "obs + " * 3000 + "obs",
    ],
)
def test_constant_parts_are_bounded_before_anything_runs(source: str) -> None:
    with pytest.raises(ExprError):
        Expression(source, NAMES)


def test_bounded_expressions_still_load() -> None:
    for source in ("2**63", "after.x[:, None] ** 2 ** 3", "obs[..., 0] * 0x3A2", "-(-(1.5))"):
        Expression(source, NAMES)


def test_an_evaluation_past_its_deadline_is_stopped() -> None:
    slow = Expression("where(obs > 0, obs * 2, obs) + obs * obs - obs", NAMES)
    big = np.ones(4_000_000)
    with evaluation_deadline(0.001), pytest.raises(ExpressionTimeout, match="--timeout"):
        slow(obs=big)
    with evaluation_deadline(60):
        assert slow(obs=big[:3]).tolist() == [2.0, 2.0, 2.0]
    assert slow(obs=big[:1]).tolist() == [2.0]  # no deadline outside the block


def test_verify_gives_each_evaluation_a_calls_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier evaluates the spec's expressions on the host inside ``--timeout``: one past
    it ends the level as a spec that cannot be checked (exit 2), and the run returns."""
    spec = load_spec(PONG_SPEC)
    slow = Expression("where(obs > 0, obs * 2, obs) + obs * obs - obs", NAMES)

    def level_with_a_slow_expression(level: int, ctx: object) -> object:
        slow(obs=np.ones(4_000_000))
        raise AssertionError("the deadline did not stop the evaluation")

    # no port or reference is built: the level itself is the one that evaluates
    monkeypatch.setattr(runner.DriverPair, "open", lambda self: (None, None))
    monkeypatch.setattr(runner.DriverPair, "sources", lambda self, side: [])
    monkeypatch.setattr(runner, "run_level", level_with_a_slow_expression)
    options = VerifyOptions(timeout_s=0.001, sandbox=None)
    report = runner.verify(spec, PONG_SPEC.parent, [0], options)
    assert report.exit_code == 2, report.levels[0].summary
    assert "took longer than the 0.001 s" in report.levels[0].summary


DEEP = 5000


def test_deeply_nested_rule_cases_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rules check --cases`` on a cases.toml 5,000 arrays deep: a RecursionError 2,998 lines
    long and exit 1; the cases file now goes through the depth guard every TOML reader uses."""
    cases = tmp_path / "cases.toml"
    cases.write_text("deep = " + "[" * DEEP + "]" * DEEP + "\n")
    code, _, err = run_cli(["rules", "check", "duel", "--cases", str(cases)], capsys)
    assert_one_line(code, err, "cases.toml", "nested more than 64 deep")


def toml_parses_outside_the_guard(root: Path) -> list[str]:
    """``file:line`` of each ``tomllib.load``/``loads`` call outside ``input_files.py``, the
    one module that bounds nesting before tomllib recurses."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "input_files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "tomllib"
                and node.attr in ("load", "loads")
            ):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_every_toml_reader_bounds_nesting(tmp_path: Path) -> None:
    assert toml_parses_outside_the_guard(ROOT / "envforge") == []
    # the check itself sees a reader going around the guard
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "reader.py").write_text("import tomllib\nd = tomllib.loads(t)\n")
    assert toml_parses_outside_the_guard(tmp_path / "pkg") == ["pkg/reader.py:2"]


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("shape = [8]\ndtype", "shape = [100000000000]\ndtype", "observation.shape"),
        ('name = "ball_x"\n', 'name = "ball_x"\nshape = [100000, 100000]\n', "state[2].shape"),
        ("shape = [8]\ndtype", "shape = [-1]\ndtype", "observation.shape"),
    ],
)
def test_a_huge_shape_is_bad_input_when_the_spec_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, key: str
) -> None:
    """``[observation] shape = [100000000000]``: the self-check's 53-line MemoryError
    traceback; now one line at load, naming the key."""
    folder = pong_with(tmp_path, old, new)
    code, _, err = run_cli(["verify", "--ref", str(folder / "pong.c"), "--levels", "0"], capsys)
    assert_one_line(code, err, f"key '{key}'", "a shape of at most")
