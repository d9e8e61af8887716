"""Prices, the ledger, budgets (including running out mid-run) and `envforge cost`."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envforge.agents.loop import Agent, AgentLimits
from envforge.agents.messages import ModelRequest, Usage, user
from envforge.agents.scripted import ScriptedModel, reply
from envforge.agents.tools import WorkspaceTools
from envforge.cli import app
from envforge.cost.budget import Budget, estimate_input_tokens, worst_case_cost
from envforge.cost.ledger import Ledger, LedgerEntry
from envforge.cost.meter import MeteredModel
from envforge.cost.prices import (
    UnknownPrice,
    load_price_table,
    price_from_options,
    user_price,
)
from envforge.errors import BadInput, BudgetExceeded


def test_price_table_is_versioned_data_with_exact_rates() -> None:
    table = load_price_table()
    assert table.version and "claude-sonnet-4-6" in table.names()
    for name in table.names():
        price = table.price_for(name)
        assert price.version == table.version
        assert price.output >= price.input >= price.cache_read >= 0
        assert price.batch_input is not None and price.batch_input < price.input
    assert table.price_for("claude-sonnet-4-5-20250929") == table.price_for("claude-sonnet-4-5")
    sonnet = table.price_for("claude-sonnet-4-6")
    usage = Usage(input_tokens=1, output_tokens=1, cache_read_tokens=1, cache_write_tokens=1)
    assert sonnet.cost(usage) == Decimal("0.00002205")  # (3 + 15 + 0.3 + 3.75) / 1e6, exactly
    assert sonnet.cost(
        Usage(input_tokens=1_000_000, output_tokens=1_000_000), batch=True
    ) == Decimal("9")


def test_a_thousand_small_calls_add_up_exactly() -> None:
    price = user_price("0.1", "0.3")
    total = sum(
        (price.cost(Usage(input_tokens=1, output_tokens=1)) for _ in range(1000)), Decimal(0)
    )
    assert total == Decimal("0.0004")  # floats would give 0.00039999999999999996


def test_unknown_prices_need_the_user(tmp_path: Path) -> None:
    with pytest.raises(UnknownPrice, match="--price-in"):
        load_price_table().price_for("openai:my-local-llama")
    assert isinstance(UnknownPrice("x"), BadInput)
    assert price_from_options(None, None) is None
    local = price_from_options(0.0, 0.0)
    assert local is not None and local.cost(Usage(10**6, 10**6, 10**6, 10**6)) == 0
    with pytest.raises(BadInput, match="both"):
        price_from_options(1.0, None)
    with pytest.raises(BadInput, match="expected a finite number of USD per million tokens >= 0"):
        user_price(-1, 1)
    broken = tmp_path / "prices.toml"
    broken.write_text('version = "x"\n[models.m]\ninput = 1\noutput = 2\n')
    with pytest.raises(BadInput, match="missing cache_read, cache_write"):
        load_price_table(broken)


def test_ledger_is_wal_and_each_call_is_durable_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        ledger.record(
            LedgerEntry(
                "job-a",
                "r1",
                "translate 1",
                "claude-sonnet-4-6",
                Usage(10, 5),
                Decimal("0.1"),
                "v1",
            )
        )
        # another connection (another process in real life) sees it before the next call
        other = sqlite3.connect(path)
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert other.execute("SELECT cost_usd, job FROM calls").fetchall() == [("0.1", "job-a")]
        other.close()
        ledger.record(
            LedgerEntry(
                "job-a", "r1", "repair 2", "gemini-2.5-pro", Usage(1, 1), Decimal("0.2"), "v1"
            )
        )
        ledger.record(
            LedgerEntry(
                "job-b", "r2", "translate 1", "gemini-2.5-pro", Usage(2, 2), Decimal("0.3"), "v1"
            )
        )
        assert ledger.spent(job="job-a") == Decimal("0.3") and ledger.spent() == Decimal("0.6")
        by_model = {r.key: (r.calls, r.cost_usd, r.usage) for r in ledger.summary("model")}
        assert by_model == {
            "claude-sonnet-4-6": (1, Decimal("0.1"), Usage(10, 5)),
            "gemini-2.5-pro": (2, Decimal("0.5"), Usage(3, 3)),
        }
        assert [r.key for r in ledger.summary("job")] == ["job-a", "job-b"]
        (day,) = ledger.summary("day")
        assert len(day.key) == 10 and day.calls == 3
        with pytest.raises(BadInput):
            ledger.summary("week")  # type: ignore[arg-type]


def test_worst_case_uses_max_tokens_and_the_dearest_input_rate() -> None:
    price = user_price("3", "15", cache_write="3.75")
    request = ModelRequest("s" * 300, (user("u" * 300),), max_tokens=1000)
    assert estimate_input_tokens(request) == 200  # 600 characters at 3 per token, rounded up
    assert worst_case_cost(request, price) == (200 * Decimal("3.75") + 1000 * 15) / Decimal(10**6)
    Budget(Decimal("1")).check(Decimal("0.98"), Decimal("0.02"))  # exactly at the limit is allowed
    with pytest.raises(BudgetExceeded):
        Budget(Decimal("1")).check(Decimal("0.98"), Decimal("0.021"))
    Budget(None).check(Decimal("1e9"), Decimal("1e9"))


def test_budget_exhausted_mid_run_stops_before_the_call_that_could_exceed_it(
    tmp_path: Path,
) -> None:
    price = user_price("3", "15")
    usage = Usage(input_tokens=2000, output_tokens=1000)  # 0.021 per call
    model = ScriptedModel(
        [
            reply(
                calls=[("write_file", {"path": "a.py", "content": "A = 1\n"})], usage=usage, turn=1
            ),
            reply(
                calls=[("write_file", {"path": "b.py", "content": "B = 2\n"})], usage=usage, turn=2
            ),
            reply(
                calls=[("write_file", {"path": "c.py", "content": "C = 3\n"})], usage=usage, turn=3
            ),
            reply("done", usage=usage),
        ]
    )
    limits = AgentLimits(max_tokens=2000)  # a call may cost 0.03 + its input (~0.003)
    ledger_path = tmp_path / "ledger.sqlite"
    with Ledger(ledger_path) as ledger:
        ledger.record(
            LedgerEntry("job", "earlier", "translate 1", "m", Usage(), Decimal("0.01"), "user")
        )
        metered = MeteredModel(model, price, ledger, Budget(Decimal("0.08")), "job", "now")
        result = Agent(metered, WorkspaceTools(tmp_path / "ws"), limits).run("system", user("task"))

    assert result.status == "budget" and "would be exceeded" in result.message
    # 0.01 earlier + 2 calls * 0.021 = 0.052; a third could cost ~0.033 more: over 0.08, refused
    assert len(model.requests) == 2 and metered.calls == 2
    assert metered.cost_usd == Decimal("0.042")
    with Ledger(ledger_path) as ledger:
        assert ledger.spent(job="job") == Decimal("0.052")
        assert [e.run for e in ledger.entries(job="job")] == ["earlier", "now", "now"]
    assert (tmp_path / "ws" / "a.py").read_text() == "A = 1\n"
    assert (tmp_path / "ws" / "b.py").read_text() == "B = 2\n"
    assert not (tmp_path / "ws" / "c.py").exists()


def test_cost_command_reports_by_job_model_and_day(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        ledger.record(
            LedgerEntry(
                "pong-1",
                "r",
                "translate 1",
                "claude-sonnet-4-6",
                Usage(1000, 100),
                Decimal("0.0045"),
                "v",
            )
        )
        ledger.record(
            LedgerEntry(
                "pong-2",
                "r",
                "translate 1",
                "gemini-2.5-pro",
                Usage(1000, 100),
                Decimal("0.00225"),
                "v",
            )
        )
    runner = CliRunner()
    nothing = runner.invoke(app, ["cost", "--ledger", str(tmp_path / "none.sqlite"), "--json"])
    # a ledger named on purpose that is not there is bad input, not $0 (and is not created)
    assert isinstance(nothing.exception, BadInput) and "no ledger at" in str(nothing.exception)
    assert not (tmp_path / "none.sqlite").exists()
    table = runner.invoke(app, ["cost", "--ledger", str(path)])
    assert table.exit_code == 0 and "pong-1" in table.output and "0.0068" in table.output
    as_json = runner.invoke(app, ["cost", "--ledger", str(path), "--by", "model", "--json"])
    data = json.loads(as_json.output)
    assert data["total_usd"] == "0.00675"
    assert [(r["key"], r["cost_usd"]) for r in data["rows"]] == [
        ("claude-sonnet-4-6", "0.0045"),
        ("gemini-2.5-pro", "0.00225"),
    ]
    only = json.loads(
        runner.invoke(
            app, ["cost", "--ledger", str(path), "--by", "day", "--job", "pong-2", "--json"]
        ).output
    )
    assert only["total_usd"] == "0.00225" and len(only["rows"]) == 1


def test_the_input_estimate_follows_the_previous_calls_billed_usage() -> None:
    from envforge.cost.estimate import InputTokenEstimate

    estimate = InputTokenEstimate()
    short = ModelRequest("s", (user("x" * 2999),))
    assert estimate(short) == 1000  # nothing billed yet: 3 characters per token
    estimate.observe(short, Usage(input_tokens=500, cache_read_tokens=1000))  # 2 chars per token
    longer = ModelRequest("s", (user("x" * 2999), user("y" * 1000)))
    # the 1500 tokens billed, plus the 1000 new characters at 2 per token and a 10% margin
    assert estimate(longer) == 1500 + 550
    shrunk = ModelRequest("s", (user("x" * 999),))  # old output elided: scaled at that rate
    assert estimate(shrunk) == 550
    estimate.observe(longer, Usage())  # a call billed nothing (scripted) teaches nothing
    assert estimate(longer) == 2050


def test_a_ledger_from_before_the_one_hour_cache_column_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE calls (id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL,"
            " day TEXT NOT NULL, job TEXT NOT NULL, run TEXT NOT NULL, purpose TEXT NOT NULL,"
            " model TEXT NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,"
            " cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,"
            " cost_usd TEXT NOT NULL, price_version TEXT NOT NULL);"
            "INSERT INTO calls VALUES (1, '2026-01-01T00:00:00', '2026-01-01', 'j', 'r', 'p',"
            " 'm', 10, 1, 0, 0, '0.5', 'v');"
        )
    with Ledger(path) as ledger:
        ledger.record(LedgerEntry("j", "r", "p", "m", Usage(1, 1, 0, 2, 3), Decimal("0.25"), "v"))
        assert [e.usage for e in ledger.entries()] == [Usage(10, 1), Usage(1, 1, 0, 2, 3)]
        assert ledger.spent(job="j") == Decimal("0.75")
