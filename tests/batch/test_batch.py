"""Batch jobs: one manifest, one budget, exact reports, resume after kill -9, Ray, budget races.

Five scripted pong jobs (a success after one repair, a port that never passes, a provider
error, a budget stop, an agent that writes nothing) run once in-process as the reference run;
the kill -9 test and the Ray test must end in exactly its states and ledger.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from test_repair import OBSERVE, _needs_pong

from envforge.agents.messages import ModelRequest, Usage, user
from envforge.agents.script_file import ScriptFileModel
from envforge.batch.batch_report import BatchReport, to_markdown
from envforge.batch.gate import CallRecord, Gate, Refusal
from envforge.batch.manifest import load_manifest
from envforge.batch.meter import BatchMeter, ResumeDiverged
from envforge.batch.plan import plan_jobs
from envforge.batch.run_batch import RunOptions, batch_lock, run_batch
from envforge.batch.run_job import best_level, final_steps_per_second
from envforge.batch.store import BatchStore, JobKey
from envforge.cost.ledger import LedgerEntry
from envforge.cost.prices import user_price
from envforge.errors import BadInput, BudgetExceeded
from envforge.translate.orchestrate import Iteration

ROOT = Path(__file__).resolve().parents[2]
# 1000*3 + 200*15 + 5000*0.3 + 300*3.75 = 8625 micro-dollars per call at the manifest's rates
USAGE = {"input_tokens": 1000, "output_tokens": 200, "cache_read_tokens": 5000,
         "cache_write_tokens": 300}  # fmt: skip
BIG = {"input_tokens": 10_000, "output_tokens": 4000}  # 0.09 per call
BROKEN = OBSERVE.replace("observe", "observe_fast")

MANIFEST = """
[batch]
name = "five"
total_budget_usd = 5
workers = 2

[defaults]
ref = "{ref}"
levels = "0"
scale = 0.01
max_steps = 4
max_tokens = 4000
price_in = 3
price_out = 15
price_cache_read = 0.3
price_cache_write = 3.75

[[job]]
name = "fixed"
model = "scripted:fixed.json"
max_iters = 3

[[job]]
name = "stuck"
model = "scripted:stuck.json"
max_iters = 2

[[job]]
name = "flaky"
model = "scripted:flaky.json"

[[job]]
name = "tight"
model = "scripted:tight.json"
budget_usd = 0.12

[[job]]
name = "silent"
model = "scripted:silent.json"
max_iters = 1
"""


def _write(path: str, content: str, usage: dict[str, int] = USAGE) -> dict[str, Any]:
    return {"calls": [["write_file", {"path": path, "content": content}]], "usage": usage}


def _say(text: str, usage: dict[str, int] = USAGE) -> dict[str, Any]:
    return {"text": text, "usage": usage}


def make_batch(folder: Path) -> Path:
    """The five-job manifest and its scripts in ``folder``; returns the manifest."""
    good = _needs_pong()
    broken = good.replace(OBSERVE, BROKEN)
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {
        # translate: a port whose observe is misnamed (L0 fails); repair: rename it back
        # (a summary after an unverified change is answered with a reminder: each is said twice)
        "fixed": [
            _write("port/pong.py", broken),
            _say("Ported pong."),
            _say("Ported pong, yes."),
            {
                "calls": [["edit_file", {"path": "port/pong.py", "old": BROKEN, "new": OBSERVE}]],
                "usage": USAGE,
            },  # fmt: skip
            _say("Renamed observe back."),
            _say("Renamed it, yes."),
        ],
        # the same broken port, and a repair that changes nothing (its check is remembered)
        "stuck": [
            _write("port/pong.py", broken),
            _say("Done."),
            _say("Done, yes."),
            _say("I cannot see the bug."),
            _say("I still cannot."),
        ],  # fmt: skip
        "flaky": [
            {"calls": [["list_files", {"path": "."}]], "usage": USAGE},
            {"error": "provider overloaded (scripted)"},
        ],
        # the first call fits the job's 0.12; the second could cost 0.09 + 0.06 more
        "tight": [
            {
                "calls": [["write_file", {"path": "port/NOTES.md", "content": "plan"}]],
                "usage": BIG,
            },  # fmt: skip
            _say("never asked", BIG),
        ],
        "silent": [_say("I would rather not write a port."), _say("Still no.")],
    }
    for name, script in scripts.items():
        (folder / f"{name}.json").write_text(json.dumps(script))
    manifest = folder / "jobs.toml"
    manifest.write_text(MANIFEST.format(ref=ROOT / "references" / "pong" / "pong.c"))
    return manifest


CALL = Decimal("0.008625")
EXPECTED = {  # job: (state, status, iterations, levels passed, best level, calls, cost)
    "fixed": ("passed", "verified", 2, [0], 0, 6, 6 * CALL),
    "stuck": ("failed", "iteration_limit", 2, [], None, 5, 5 * CALL),
    "flaky": ("error", "model_error", 1, [], None, 1, CALL),
    "tight": ("budget-exhausted", "budget", 1, [], None, 1, Decimal("0.09")),
    "silent": ("failed", "iteration_limit", 1, [], None, 2, 2 * CALL),
}


def ledger_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each job's ledger rows in order, without timestamps (and without row ids: jobs
    interleave differently from run to run)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT job, run, purpose, model, input_tokens, output_tokens, cache_read_tokens,"
            " cache_write_tokens, cost_usd, price_version FROM calls ORDER BY id"
        ).fetchall()
    by_job: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_job.setdefault(row[0], []).append(row)
    return by_job


def final_states(report: BatchReport | dict[str, Any]) -> list[dict[str, Any]]:
    """The report's jobs without what legitimately differs between runs (wall time, attempts,
    where the batch folder is)."""
    data = report.to_dict() if isinstance(report, BatchReport) else report
    rows: list[dict[str, Any]] = data["jobs"]
    for row in rows:
        del row["wall_s"], row["attempts"]
        row["out"] = row["out"] and Path(row["out"]).name
    return rows


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BatchReport]:
    """The five jobs, uninterrupted, in this process."""
    manifest = make_batch(tmp_path_factory.mktemp("reference"))
    report = run_batch(load_manifest(manifest))
    return manifest, report


def test_five_jobs_end_as_scripted_and_the_report_is_exact(
    reference_run: tuple[Path, BatchReport],
) -> None:
    manifest, report = reference_run
    got = {
        row.job: (row.state, row.status, row.iterations, list(row.levels_passed),
                  row.best_level, row.calls, row.cost_usd)
        for row in report.rows
    }  # fmt: skip
    assert got == EXPECTED
    assert report.spent_usd == 14 * CALL + Decimal("0.09") == Decimal("0.21075")
    assert report.counts == {"passed": 1, "failed": 2, "budget-exhausted": 1, "error": 1}

    rows = {row.job: row for row in report.rows}
    assert rows["fixed"].usage == Usage(6000, 1200, 30000, 1800)
    assert rows["tight"].message is not None and "budget $0.12 would be exceeded" in (
        rows["tight"].message
    )
    assert rows["flaky"].message == "provider overloaded (scripted)"
    # the passed port landed, with its provenance; a job without a port lands nothing
    landed = manifest.parent / "generated" / "pong" / "jax-fixed"
    assert (landed / "pong.py").read_text() == _needs_pong()
    assert "| verdict | verified |" in (landed / "PROVENANCE.md").read_text()
    assert rows["silent"].out is None and rows["fixed"].out == str(landed)
    assert (
        "NOT VERIFIED"
        in (manifest.parent / "generated" / "pong" / "jax-stuck" / "PROVENANCE.md").read_text()
    )

    # every ledger row is in the batch's store, which `envforge cost` can read
    db = manifest.parent / ".envforge" / "batch-five.sqlite"
    ledger = ledger_rows(db)
    assert [r[2] for r in ledger["fixed"]] == ["translate 1"] * 3 + ["repair 2"] * 3
    assert {r[1] for r in ledger["fixed"]} == {"five/fixed"}

    markdown = re.sub(r"\| \d+m\d\ds \|", "| W |", to_markdown(report))
    assert markdown.splitlines()[4:10] == [
        "| fixed | pong | jax | scripted:fixed.json | passed | L0 | 2 | 37,800 | 1,200 | 0.0518 | W | - |",
        "| stuck | pong | jax | scripted:stuck.json | failed | - | 2 | 31,500 | 1,000 | 0.0431 | W | - |",
        "| flaky | pong | jax | scripted:flaky.json | error | - | 1 | 6,300 | 200 | 0.0086 | W | - |",
        "| tight | pong | jax | scripted:tight.json | budget-exhausted | - | 1 | 10,000 | 4,000 | 0.0900 | W | - |",
        "| silent | pong | jax | scripted:silent.json | failed | - | 1 | 12,600 | 400 | 0.0172 | W | - |",
        "",
    ]  # fmt: skip
    assert markdown.splitlines()[10] == (
        "5 jobs: 1 passed, 2 failed, 1 budget-exhausted, 1 error; spent $0.2108 of $5."
    )


def _read_db(db: Path, query: str) -> list[tuple[Any, ...]]:
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute(query).fetchall()
    except sqlite3.Error:  # not created yet
        return []


def test_kill_9_mid_batch_then_the_same_command_resumes_to_the_same_end(
    reference_run: tuple[Path, BatchReport], tmp_path: Path
) -> None:
    reference_manifest, reference = reference_run
    manifest = make_batch(tmp_path / "killed")
    db = manifest.parent / ".envforge" / "batch-five.sqlite"
    command = [sys.executable, "-m", "envforge.cli", "batch", "run", str(manifest), "--json",
               "--sandbox", "none"]  # fmt: skip
    batch = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    # kill it once "fixed" has made all its calls and is verifying its repair, and some
    # other job has finished
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and batch.poll() is None:
        fixed_calls = _read_db(db, "SELECT count(*) FROM call_log WHERE job = 'fixed'")
        finished = _read_db(db, "SELECT name FROM jobs WHERE finished_at IS NOT NULL")
        if fixed_calls and fixed_calls[0][0] >= 6 and finished:
            break
        time.sleep(0.05)
    assert batch.poll() is None, "the batch ended before it could be killed"
    os.kill(batch.pid, signal.SIGKILL)
    assert batch.wait(30) == -signal.SIGKILL
    states = dict(_read_db(db, "SELECT name, state FROM jobs"))
    assert states["fixed"] == "running"
    done_before = {name for name, state in states.items() if state not in ("running", "pending")}
    assert done_before

    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 1, resumed.stderr  # not every job passed
    assert "fixed: was running when the batch stopped; resuming it" in resumed.stderr
    assert final_states(json.loads(resumed.stdout)) == final_states(reference)
    # no ledger row lost or doubled: each job's rows are the uninterrupted run's
    assert ledger_rows(db) == ledger_rows(
        reference_manifest.parent / db.relative_to(manifest.parent)
    )
    attempts = dict(_read_db(db, "SELECT name, attempts FROM jobs"))
    assert attempts["fixed"] == 2
    assert all(attempts[name] == 1 for name in done_before)  # finished jobs were not rerun
    assert _read_db(db, "SELECT count(*) FROM reservations") == [(0,)]


@pytest.mark.slow
def test_the_same_manifest_on_a_local_ray_instance(
    reference_run: tuple[Path, BatchReport], tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    reference_manifest, reference = reference_run
    manifest = make_batch(tmp_path / "ray")
    report = run_batch(load_manifest(manifest), RunOptions(executor="ray", workers=2))
    assert final_states(report) == final_states(reference)
    db = Path(".envforge") / "batch-five.sqlite"
    assert ledger_rows(manifest.parent / db) == ledger_rows(reference_manifest.parent / db)
    assert (manifest.parent / "generated" / "pong" / "jax-fixed" / "pong.py").read_text() == (
        _needs_pong()
    )


# ---- the total budget under contention ----------------------------------------------------

WORST = Decimal("0.1")
TOTAL = Decimal("1.05")  # room for ten worst cases, not eleven


def _race(db: str, job: str, barrier: Any, results: Any) -> None:
    """One worker process: two threads reserve and settle worst-case calls until refused."""
    import threading

    store = BatchStore(db)
    gate = Gate(store, TOTAL, {})
    made: list[int] = []
    lock = threading.Lock()

    def spend(thread: int) -> None:
        barrier.wait()
        while True:
            grant = gate.reserve(job, WORST)
            if isinstance(grant, Refusal):
                return
            with lock:
                made.append(thread)
                seq = len(made)
            time.sleep(0.002)  # the call in flight, holding its reservation
            entry = LedgerEntry(job, "race", "race", "m", Usage(), WORST, "v")
            gate.settle(grant.reservation, CallRecord(seq, f"d{seq}", "{}", entry))

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    results.put(len(made))


def test_workers_racing_for_the_last_of_the_budget_never_overspend(tmp_path: Path) -> None:
    db = tmp_path / "race.sqlite"
    BatchStore(db).close()
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    workers = [ctx.Process(target=_race, args=(str(db), f"job{i}", barrier, results))
               for i in range(2)]  # fmt: skip
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    made = results.get(timeout=5) + results.get(timeout=5)
    with BatchStore(db) as store:
        spent = sum((s.cost_usd for s in store.spending().values()), Decimal(0))
    assert made == 10 and spent == Decimal("1.0") <= TOTAL


def test_the_batch_budget_stops_the_job_that_loses_the_race(tmp_path: Path) -> None:
    # input is free, so a call's worst case is exactly its 1000 output tokens: $0.015
    manifest = tmp_path / "jobs.toml"
    manifest.write_text(
        f"""
[batch]
total_budget_usd = 0.02
workers = 2
[defaults]
ref = "{ROOT / "references" / "pong" / "pong.c"}"
max_iters = 1
max_steps = 1
max_tokens = 1000
price_in = 0
price_out = 15
[[job]]
name = "a"
model = "scripted:talk.json"
[[job]]
name = "b"
model = "scripted:talk.json"
"""
    )
    (tmp_path / "talk.json").write_text(json.dumps([_say("no", {"output_tokens": 1000})]))
    report = run_batch(load_manifest(manifest))
    states = sorted(row.state for row in report.rows)
    assert states == ["budget-exhausted", "failed"]
    assert report.spent_usd == Decimal("0.015")
    loser = next(row for row in report.rows if row.state == "budget-exhausted")
    assert loser.message is not None and loser.message.startswith("batch budget $0.02")


def test_a_job_that_outruns_its_estimate_is_reconciled_before_its_next_call(
    tmp_path: Path,
) -> None:
    """A provider that bills 40 k output tokens ($0.60 at $15/M) for calls asking at most 100:
    no estimate of the request can see that coming. The gate reconciles: the next call
    reserves at least what the last one cost, so the job's $1.00 is not passed (it reached
    $1.20 when every call reserved only its estimate)."""
    overbilled = {"input_tokens": 10, "output_tokens": 40_000}
    script = tmp_path / "billing.json"
    script.write_text(json.dumps([_say(f"reply {i}", overbilled) for i in range(1, 4)]))
    price = user_price("3", "15")
    request = ModelRequest(system="port pong", messages=(user("go"),), max_tokens=100)
    with BatchStore(tmp_path / "b.sqlite") as store:
        store.sync_jobs([JobKey("j", "config", "pong")])
        gate = Gate(store, Decimal(50), {"j": Decimal("1.00")})
        meter = BatchMeter(ScriptFileModel(script), price, gate, "j", "b/j")
        assert meter.complete(request).text == "reply 1"
        with pytest.raises(BudgetExceeded, match=r"^budget \$1.00 would be exceeded"):
            meter.complete(replace(request, messages=(user("go on"),)))
        assert store.spending()["j"].cost_usd == Decimal("0.60003")


def test_a_jobs_first_call_reserves_what_other_first_calls_cost(tmp_path: Path) -> None:
    """Two jobs whose short first requests are billed 200 k input tokens each ($0.60) under a
    $1.00 batch: the second job's first call has no bill of its own to learn from, so it
    reserves the largest first call of the batch and is refused, instead of being estimated
    at 3 characters per token (under a cent) and taking the batch to $1.20."""
    huge = {"input_tokens": 200_000, "output_tokens": 10}
    script = tmp_path / "billing.json"
    script.write_text(json.dumps([_say("hello", huge)]))
    price = user_price("3", "15")
    request = ModelRequest(system="port pong", messages=(user("go"),), max_tokens=100)
    with BatchStore(tmp_path / "b.sqlite") as store:
        store.sync_jobs([JobKey("a", "config", "pong"), JobKey("b", "config", "pong")])
        gate = Gate(store, Decimal("1.00"), {"a": None, "b": None})
        first = BatchMeter(ScriptFileModel(script), price, gate, "a", "b/a")
        assert first.complete(request).text == "hello"
        second = BatchMeter(ScriptFileModel(script), price, gate, "b", "b/b")
        with pytest.raises(BudgetExceeded, match=r"^batch budget \$1.00 would be exceeded"):
            second.complete(request)
        spent = sum((s.cost_usd for s in store.spending().values()), Decimal(0))
    assert spent == Decimal("0.60015") <= Decimal("1.00")


# ---- resume mechanics, reports from the CLI, bad input -------------------------------------


def test_a_resumed_job_replays_logged_calls_then_continues_live(tmp_path: Path) -> None:
    script = tmp_path / "two.json"
    script.write_text(json.dumps([_say("first"), _say("second")]))
    price = user_price("3", "15", cache_read="0.3", cache_write="3.75")
    request = ModelRequest(system="s", messages=(user("hello"),), max_tokens=100)
    with BatchStore(tmp_path / "b.sqlite") as store:
        store.sync_jobs([JobKey("j", "config", "pong")])
        gate = Gate(store, Decimal(1), {"j": None})
        first = BatchMeter(ScriptFileModel(script), price, gate, "j", "b/j")
        assert first.complete(request).text == "first"
        # the process dies here; the restarted job asks the same first question
        again = BatchMeter(ScriptFileModel(script), price, gate, "j", "b/j")
        assert again.complete(request).text == "first"  # from the call log, not the script
        assert again.complete(replace(request, max_tokens=99)).text == "second"
        assert again.replayed == 1 and again.cost_usd == 2 * CALL
        assert store.spending()["j"].calls == 2  # one ledger row per call, none doubled

        # a restarted job that asks something else stops loudly instead of replaying
        other = BatchMeter(ScriptFileModel(script), price, gate, "j", "b/j")
        with pytest.raises(ResumeDiverged, match="call 1 differs"):
            other.complete(replace(request, system="changed"))


def test_status_and_report_commands_read_the_store(
    reference_run: tuple[Path, BatchReport], tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from envforge.cli import app

    manifest, report = reference_run
    runner = CliRunner()
    result = runner.invoke(app, ["batch", "report", str(manifest), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == report.to_dict()
    result = runner.invoke(app, ["batch", "report", str(manifest), "--markdown"])
    assert result.stdout == to_markdown(report)
    result = runner.invoke(app, ["batch", "status", str(manifest)])
    assert result.exit_code == 0 and "budget-exhaus" in result.stdout
    # a batch that never ran: every job pending, and no store is created
    fresh = make_batch(tmp_path / "fresh")
    result = runner.invoke(app, ["batch", "status", str(fresh), "--json"])
    assert json.loads(result.stdout)["states"] == {"pending": 5}
    assert not (fresh.parent / ".envforge").exists()


def test_a_second_driver_for_the_same_batch_is_refused(tmp_path: Path) -> None:
    manifest = load_manifest(make_batch(tmp_path))
    with batch_lock(manifest.db_path), pytest.raises(BadInput, match="already running"):
        run_batch(manifest)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("total_budget_usd = 5", ""), "key 'batch.total_budget_usd': expected a value"),
        (("max_iters = 3", "max_iter = 3"), "key 'job[fixed].max_iter': expected no such key"),
        (('levels = "0"', 'levels = "0-9"'), "key 'job[fixed].levels': expected levels like"),
        (("max_iters = 2", "max_iters = 0"), "'job[stuck].max_iters': expected an integer >= 1"),
        (('name = "flaky"', 'name = "fixed"'), "key 'job[fixed].name': expected a name no"),
        (('"scripted:tight.json"', '"gpt-5"'), "job tight: unknown model 'gpt-5'"),
        (("price_out = 15", ""), "expected price_in and price_out together"),
        (('"scripted:silent.json"', '"scripted:nope.json"'), "model script not found"),
    ],
)
def test_bad_manifests_are_refused_in_one_line_naming_the_key(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    manifest = make_batch(tmp_path)
    manifest.write_text(manifest.read_text().replace(*edit, 1))
    with pytest.raises(BadInput) as error:
        plan_jobs(load_manifest(manifest))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_input_on_the_command_line_is_one_line_exit_2_and_spends_nothing(
    tmp_path: Path,
) -> None:
    manifest = make_batch(tmp_path)
    manifest.write_text(manifest.read_text().replace('"scripted:tight.json"', '"gpt-5"'))
    done = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "batch", "run", str(manifest)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    error = done.stderr.splitlines()[-1]  # (an info line about the sandbox may come first)
    assert error.startswith("envforge: error: ") and "job tight: unknown model 'gpt-5'" in error
    assert not (tmp_path / ".envforge").exists()  # nothing ran, nothing was recorded


def _iteration(number: int, levels: dict[int, str], sps: float | None, finding: str) -> Iteration:
    return Iteration(number, "optimize", "submitted", 1, "", levels, 1, Usage(), CALL, finding, sps)


def test_best_level_and_the_throughput_of_the_port_that_stayed() -> None:
    iterations = [
        _iteration(1, {0: "pass", 1: "fail", 2: "pass"}, None, "L1 transition"),
        _iteration(2, {0: "pass", 1: "pass", 2: "pass"}, 1000.0, ""),
        _iteration(3, {0: "pass", 1: "pass", 2: "pass"}, 3000.0, "kept: 3,000 steps/s"),
        _iteration(4, {0: "fail"}, None, "undone (L0 contract); back to iteration 3"),
        _iteration(5, {0: "pass", 1: "pass", 2: "pass"}, 2000.0, "undone (not faster)"),
    ]
    assert best_level(iterations[:1]) == 0  # L2 passing after a failing L1 does not count
    assert best_level(iterations) == 2
    assert final_steps_per_second(iterations) == 3000.0
    assert final_steps_per_second(iterations[:1]) is None
