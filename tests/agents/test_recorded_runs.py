"""Translate runs played through `envforge play` and recorded as cassettes, replayed.

Each ``cassettes/<run>.jsonl`` has a ``cassettes/<run>.json`` beside it: the translate options
the run was recorded with (those that shape requests) and what it came to: the stop status,
the episodes with their agent statuses and verdicts, the model calls and the dollars the
recorded calls cost at the model's price. A replay answers every call from the cassette after
checking the request is the one recorded, and runs the real verifier on the ports it writes:
the same run must end the same way. See docs/TRANSLATE.md ("A played model") for how they were
recorded."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from envforge.agents.cassette import ReplayModel
from envforge.cost.ledger import Ledger
from envforge.cost.prices import load_price_table

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = Path(__file__).resolve().parent / "cassettes"
RUNS = sorted(p.stem for p in CASSETTES.glob("*.jsonl"))


def _run(name: str) -> tuple[Path, dict[str, Any]]:
    return CASSETTES / f"{name}.jsonl", json.loads((CASSETTES / f"{name}.json").read_text())


def _recorded_usd(model: str, responses: list[dict[str, Any]]) -> Decimal:
    from envforge.agents.messages import Usage

    price = load_price_table().price_for(model)
    return sum((price.cost(Usage(**r["usage"])) for r in responses), Decimal(0))


@pytest.mark.parametrize("name", RUNS)
def test_a_recorded_run_says_what_it_came_to(name: str) -> None:
    """The cassette and its note agree: calls, dollars, episodes (cheap: nothing replayed)."""
    cassette, run = _run(name)
    replay = ReplayModel(cassette)
    expect = run["expect"]
    assert replay.name == run["model"]
    assert len(replay.calls) == expect["calls"]
    responses = [response for _, response in replay.calls]
    assert _recorded_usd(replay.name, responses) == Decimal(expect["recorded_usd"])
    assert len(expect["episodes"]) >= 1 and cassette.stat().st_size < 2_000_000


@pytest.mark.slow  # each replay verifies every episode's port at the run's levels
@pytest.mark.parametrize("name", RUNS)
def test_a_recorded_run_replays_to_the_same_end(name: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envforge.cli import app

    cassette, run = _run(name)
    expect = run["expect"]
    args = [
        "translate",
        *[str(ROOT / a) if a.startswith("references/") else a for a in run["args"]],
        "--model", f"replay:{cassette}", "--json",
        "--out", str(tmp_path / "out"), "--workspace", str(tmp_path / "ws"),
        "--ledger", str(tmp_path / "ledger.sqlite"), "--job", name,
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == (0 if expect["status"] == "verified" else 1), result.output
    outcome = json.loads(result.stdout)
    assert outcome["status"] == expect["status"]
    episodes = [[it["kind"], it["agent_status"], it["verdict"]] for it in outcome["iterations"]]
    assert episodes == expect["episodes"]
    assert outcome["calls"] == expect["calls"] and Decimal(outcome["cost_usd"]) == 0
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        entries = ledger.entries(job=name)
    price = load_price_table().price_for(run["model"])
    assert len(entries) == expect["calls"]
    assert sum((price.cost(e.usage) for e in entries), Decimal(0)) == Decimal(
        expect["recorded_usd"]
    )
