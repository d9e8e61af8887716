"""``envforge init --ref pettingzoo:<module>``: a PettingZoo AEC env's spec drafted from
PettingZoo's own API and the probe, passing its self-check with no hand edits; and the
self-check failing by name when the drafted state leaves the game out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envforge.cli import app
from envforge.init.seats_draft import draft_seat_spec
from envforge.init.selfcheck import SelfCheckConfig, self_check
from envforge.spec import load_spec

pytest.importorskip("pettingzoo")

TICTACTOE = "pettingzoo:pettingzoo.classic.tictactoe_v3"


def test_init_drafts_tictactoe_and_the_draft_passes_its_self_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "tictactoe"
    result = CliRunner().invoke(app, ["init", "--ref", TICTACTOE, "--out", str(out)])
    assert result.exit_code == 0, result.stdout
    assert "self-check passes for tictactoe" in result.stdout
    spec = load_spec(out / "env.toml")  # as written: no hand edit
    assert spec.agents is not None and spec.agents.names == ("player_1", "player_2")
    assert spec.agents.illegal == "terminate" and spec.agents.zero_sum
    assert spec.agents.action_mask == "legal_action_mask"
    assert spec.observation.shape == (2, 3, 3, 2) and spec.action.n == 9
    assert spec.field("board_squares").attr == "board.squares"
    assert self_check(spec, SelfCheckConfig(episodes=4, seed=1)).passed


def test_the_self_check_fails_naming_what_a_state_without_the_board_gets_wrong(
    tmp_path: Path,
) -> None:
    draft = draft_seat_spec(TICTACTOE, "tictactoe", tmp_path, {})
    without_board = [f for f in draft.fields if f.name != "board_squares"]
    result = self_check(draft.spec(without_board), SelfCheckConfig(episodes=4))
    assert not result.passed
    finding = result.findings[0]
    assert finding.check == "selfcheck.mismatch"
    assert set(finding.fields) & {"legal_action_mask", "obs", "terminations", "rewards"}
