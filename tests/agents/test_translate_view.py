"""The live view of a translate run: redrawn in place on a terminal, plain lines off one; and
the limits as --help and docs/TRANSLATE.md state them."""

from __future__ import annotations

import io
import time
from decimal import Decimal
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from envforge.agents.messages import Usage
from envforge.cli import app
from envforge.commands.translate_view import RunView, render_state
from envforge.translate.progress import RunState

ROOT = Path(__file__).resolve().parents[2]


def _state() -> RunState:
    state = RunState(max_episodes=20, budget_usd=Decimal("2"))
    state.update(
        episode=2,
        kind="repair",
        doing="step 3: edit_file path=port/pong.py",
        calls=9,
        usage=Usage(
            input_tokens=2140, output_tokens=3312, cache_read_tokens=61300, cache_write_tokens=9120
        ),  # fmt: skip
        cost_usd=Decimal("0.0712"),
        verdict="not equivalent (envforge's check after translate 1)",
        deadline=time.monotonic() + 3600,
        retry_wait_s=40.0,
    )
    return state


def test_off_a_terminal_each_progress_call_prints_one_plain_line() -> None:
    out = io.StringIO()
    state = _state()
    with RunView(state, "translating pong", Console(file=out, force_terminal=False)) as view:
        assert not view.live_mode
        view.progress("repair 2: step 3: edit_file")
        state.update(calls=10, doing="step 4: run_verify levels=0-3")
        view.progress("repair 2: step 4: run_verify")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\x1b[" not in out.getvalue()  # no escape codes, no redraws
    first, second = lines
    assert first.startswith("[episode 2/20 repair] step 3: edit_file path=port/pong.py | calls 9")
    assert "tokens 2140 in, 61.3k cache read, 9120 cache write, 3312 out" in first
    assert "$0.0712 of $2" in first and "(40s on retries)" in first and "left" in first
    assert first.endswith("not equivalent (envforge's check after translate 1)")
    assert "calls 10" in second and "step 4: run_verify" in second


def test_on_a_terminal_the_table_is_redrawn_in_place() -> None:
    out = io.StringIO()
    state = _state()
    console = Console(file=out, force_terminal=True, width=160)
    with RunView(state, "translating pong", console) as view:
        assert view.live_mode
        view.progress("ignored on a terminal: the table shows the state")
        time.sleep(0.7)  # one redraw at least
        state.update(calls=11, verdict="equivalent (the agent's run_verify 0-3)")
        time.sleep(0.7)
    text = out.getvalue()
    assert "\x1b[" in text  # cursor movement: drawn over itself
    for cell in ("episode", "2/20 repair", "calls", "cache read", "$0.0712 of $2", "left"):
        assert cell in text, cell
    assert "equivalent (the agent's run_verify 0-3)" in text  # the last draw shows the end
    assert "ignored on a terminal" not in text
    # what one draw holds, cell by cell
    table = Console(file=io.StringIO(), width=160)
    table.print(render_state(state, "t"))
    assert "11" in table.file.getvalue()  # type: ignore[attr-defined]


def test_no_time_limit_says_so() -> None:
    assert "no time limit" in RunState().line() and "episode -" in RunState().line()


def test_the_limits_are_in_the_help_and_the_docs() -> None:
    result = CliRunner().invoke(app, ["translate", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    help_text = " ".join(result.output.split())
    assert "--episode-minutes" in help_text and "--max-minutes" in help_text
    assert "an episode may use what is left of it" in help_text
    assert "retry waits count" in help_text
    docs = (ROOT / "docs" / "TRANSLATE.md").read_text()
    assert "`--episode-minutes`" in docs and "each episode may use what is left" in docs
    assert "waiting on retries" in docs and "| `verified` |" in docs
