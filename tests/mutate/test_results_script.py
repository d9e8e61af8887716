"""benchmarks/mutation_results.py: a campaign writes only its JSON (campaigns run side by side
must not overwrite each other's render of docs/MUTATE_RESULTS.md); `--render` and
`--render-only` write the page."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_mutate_handlers import results_page


class FakeReport:
    def to_dict(self) -> dict[str, Any]:
        return {"env": "pong", "mutants": []}


@pytest.mark.parametrize(
    "flags, page_written",
    [([], False), (["--render"], True)],
)
def test_a_campaign_writes_its_json_and_the_page_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], page_written: bool
) -> None:
    script = results_page()
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "OUT", tmp_path / "docs" / "mutate")
    monkeypatch.setattr(script, "run_campaign", lambda *a, **k: FakeReport())
    monkeypatch.setattr(script, "section", lambda data, command: [f"## {data['env']}"])
    argv = ["mutation_results.py", "--envs", "pong", "--targets", "jax", "--max", "1"]
    monkeypatch.setattr(sys, "argv", argv + flags)
    assert script.main() == 0
    data = json.loads((tmp_path / "docs" / "mutate" / "pong.json").read_text())
    assert data["command"].startswith("envforge mutate pong --max 1")
    page = tmp_path / "docs" / "MUTATE_RESULTS.md"
    assert page.exists() == page_written
    # --render-only, as before: the page from the JSONs, no campaign
    monkeypatch.setattr(script, "run_campaign", None)
    monkeypatch.setattr(sys, "argv", ["mutation_results.py", "--render-only"])
    assert script.main() == 0
    assert "## pong" in page.read_text()
