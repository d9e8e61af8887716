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


def test_a_rerun_with_port_reruns_that_folders_campaign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--port tests/ports/taxi_ownkey --rerun ID` re-runs the own-key campaign's mutant on that
    folder's port with the spec beside it (before, `--port` was ignored: the shipped pong and
    cartpole campaigns of `--envs`' default were looked up, and no own-key mutant re-ran)."""
    script = results_page()
    out = tmp_path / "docs" / "mutate"
    out.mkdir(parents=True)
    monkeypatch.setattr(script, "OUT", out)
    recorded = {
        "env": "taxi",
        "levels": [0, 1, 2, 3],
        "options": {"seed": 0, "scale": 0.2, "limit": 7},
        "command": "python benchmarks/mutation_results.py --max 7 --port tests/ports/taxi_ownkey",
        "mutants": [{"id": "constant:155:1"}],
    }
    (out / "taxi-ownkey.json").write_text(json.dumps(recorded))
    ran: list[Any] = []
    monkeypatch.setattr(script, "run_campaign", lambda target, *a, **k: ran.append((target, k)))
    monkeypatch.setattr(script, "put_back", lambda campaign, *a: {**campaign, "reruns": [1]})
    port = script.ROOT / "tests" / "ports" / "taxi_ownkey"
    argv = ["mutation_results.py", "--port", str(port), "--rerun", "constant:155:1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--why", "the reset sample"])
    assert script.main() == 0
    ((target, kwargs),) = ran
    assert target.root == port.resolve() and target.spec.rng.step == "distribution"
    assert [f.name for f in target.files] == ["taxi.py"]
    assert kwargs["only"] == ["constant:155:1"]
    assert json.loads((out / "taxi-ownkey.json").read_text())["reruns"] == [1]
