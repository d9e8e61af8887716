"""What a port says is data: never rich markup, never terminal control, never a line of
envforge's own. A hostile port's message carries a markup closing tag, an emoji code, the
terminal's control sequences (a window title, a screen clear, a link, a cursor query, a bell,
a carriage return) and a forged verdict line; every report shows it as written, escaped."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from conftest import PONG_PORT, run_cli
from rich.console import Console

from envforge.bench.bench_report import BenchReport
from envforge.bench.profile_report import render
from envforge.untrusted.shown import indented, one_line, shown, visible
from envforge.verify.findings import Finding, SourceLocation
from envforge.verify.verdict import LevelResult, Report

FORGED = "\nverdict: equivalent at levels 0-3"
HOSTILE = (
    "closing [/] tag at doorkey.py:100: "
    "\x1b]0;pwned\x07 \x1b[2J \x1b]8;;http://x.example/\x1b\\link\x1b]8;;\x1b\\ \x1b[6n "
    "bell\x07 back\r over \x9b31m" + FORGED
)
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Any control character but newline and tab (styling is off in these consoles)."""


def plain_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=300, color_system=None, force_terminal=False), out


def assert_shown_as_data(printed: str, real_verdicts: int = 0) -> None:
    assert RAW_CONTROLS.search(printed) is None, repr(printed)
    assert "[/]" in printed and "doorkey.py:100:" in printed  # as written: no markup, no emoji
    assert "\\x1b]0;pwned\\x07" in printed and "\\r" in printed and "\\x9b" in printed
    starts = [line for line in printed.splitlines() if line.startswith("verdict:")]
    assert len(starts) == real_verdicts, printed


def test_the_helper_shows_every_control_character() -> None:
    assert visible("a\x1b[2Jb\x07\r\x00\x7f\x85\u2028\u202e\n\tc") == (
        "a\\x1b[2Jb\\x07\\r\\x00\\x7f\\x85\\u2028\\u202e\n\tc"
    )
    assert one_line("a\nb\tc") == "a\\nb\\tc"
    assert indented("first\nverdict: equivalent") == "first\n    verdict: equivalent"
    assert shown("[/] :100:").plain == "[/] :100:"
    assert visible(3) == "3" and visible("plain") == "plain"


def hostile_report() -> Report:
    finding = Finding(
        level=0,
        check="exception",
        message=HOSTILE,
        port_lines=[SourceLocation("pong.py", 3, "x = 1  # \x1b[2J")],
        detail="Traceback\n" + HOSTILE,
    )
    level = LevelResult(level=0, status="error", summary=HOSTILE, findings=[finding])
    return Report(env="pong", reference="pong.c", port="p\x1b[2J", levels=[level], requested=[0])


def test_the_verify_report_shows_port_text_as_data() -> None:
    console, out = plain_console()
    hostile_report().render(console)
    printed = out.getvalue()
    assert_shown_as_data(printed, real_verdicts=1)
    assert printed.rstrip().splitlines()[-1] == "verdict: error"


def test_the_profiles_source_column_shows_port_text_as_data() -> None:
    row = {"share": 0.5, "line": "pong.py:3", "text": HOSTILE.replace("\n", " "), "flops": 1.0}
    row |= {"bytes": 1.0, "selects": 0.0, "eqns": 1.0}
    profile = {
        "env": "pong",
        "port_file": "pong.py",
        "batch": 8,
        "step_s": 1e-5,
        "timed_calls": 3,
        "device": "cpu",
        "compile_s": 0.1,
        "xla": {"flops": 1.0},
        "bytes_per_unit": 4,
        "lines": [row],
        "loops": [{"kind": "while", "line": HOSTILE, "trips": 3}],
    }
    console, out = plain_console()
    render(profile, console)
    assert_shown_as_data(out.getvalue())


def test_a_bench_table_shows_port_text_as_data() -> None:
    report = BenchReport(
        env="pong",
        reference="pong.c",
        settings={},
        machine={"cpu": "x", "cores": 2, "memory_gib": 1, "load_before": [0.0]}
        | {"bandwidth_gbs": 1.0, "peak_gflops": 1.0},
        date="2026-12-08",
        skipped=[HOSTILE],
    )
    console, out = plain_console()
    report.render(console)
    assert_shown_as_data(out.getvalue())


def test_the_rules_case_report_shows_port_text_as_data() -> None:
    from envforge.commands.rules import _print_cases
    from envforge.rules.cases import CaseResult

    finding = Finding(level=1, check="rule_case", message=HOSTILE)
    result = CaseResult(case=None, passed=False, finding=finding)  # type: ignore[arg-type]
    console, out = plain_console()
    _print_cases(console, "port", [result])
    assert_shown_as_data(out.getvalue())


def test_a_failing_batch_job_shows_its_message_as_data() -> None:
    from decimal import Decimal

    from envforge.agents.messages import Usage
    from envforge.batch.batch_report import BatchReport, ReportRow, show_report

    row = ReportRow(
        job="pong-jax",
        env="pong",
        target="jax",
        model="fake",
        state="failed",
        status="iteration_limit",
        message=HOSTILE,
        levels_required="0-3",
        levels_passed=(),
        best_level=None,
        iterations=1,
        attempts=1,
        calls=1,
        usage=Usage(),
        cost_usd=Decimal(0),
        wall_s=1.0,
        steps_per_second=None,
        speedup=None,
        out=None,
    )
    console, out = plain_console()
    show_report(BatchReport("b", "batch.toml", Decimal(1), (row,)), console)
    assert_shown_as_data(out.getvalue())


@pytest.mark.parametrize("sandbox", ["process"])
def test_a_port_raising_hostile_text_gets_a_report_and_exit_1(
    sandbox: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end: the port raises on import with the hostile text; verify prints its report
    (no MarkupError traceback) with the text escaped, the real verdict the only one, and the
    repair prompt (which may land on a terminal too) escaped as well."""
    from envforge.sandbox.confine import probe

    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    future = "from __future__ import annotations\n"
    port = tmp_path / "port"
    port.mkdir()
    hostile = f"raise RuntimeError({HOSTILE!r})\n"
    (port / "pong.py").write_text(PONG_PORT.read_text().replace(future, future + hostile, 1))
    args = ["verify", "pong", "--port", str(port), "--levels", "0", "--sandbox", sandbox]
    code, out, err = run_cli([*args, "--repair-prompt"], capsys)
    assert code == 1, (out, err)
    assert "Traceback (most recent" not in err.splitlines()[0]
    # the report goes to stderr beside the repair prompt on stdout: both show the text as data
    assert_shown_as_data(err, real_verdicts=1)
    assert err.rstrip().splitlines()[-1] == "verdict: error"
    assert RAW_CONTROLS.search(out) is None and "\\x1b]0;pwned" in out, out
