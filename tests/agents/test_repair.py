"""The translate → verify → repair loop, end to end on pong with a scripted model."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from envforge.agents.loop import AgentLimits
from envforge.agents.messages import ModelRequest, ModelResponse, Usage
from envforge.agents.scripted import ScriptedModel, reply
from envforge.cost.ledger import Ledger
from envforge.cost.prices import user_price
from envforge.spec import spec_for_name
from envforge.translate.job import TranslateJob, run_translate_job
from envforge.translate.made_by import declared_made_by
from envforge.translate.orchestrate import RepairConfig
from envforge.verify.context import VerifyOptions

ROOT = Path(__file__).resolve().parents[2]
GOOD_PORT = ROOT / "generated" / "pong" / "jax" / "pong.py"
CORRECT, PLANTED = "PADDLE_SPEED = f32(8.0)", "PADDLE_SPEED = f32(9.0)"
OBSERVE = "def observe("
USAGE = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=5000, cache_write_tokens=300)
# 1000*3 + 200*15 + 5000*0.3 + 300*3.75 = 8625 micro-dollars per call at these rates
PRICE = user_price("3", "15", cache_read="0.3", cache_write="3.75")
# the whole verifier (L0-L2) at a small scale: the test must stay quick on two cores
QUICK = RepairConfig(
    levels=(0, 1, 2),
    max_iters=4,
    agent=AgentLimits(max_steps=5, max_tokens=4000),
    verify=VerifyOptions(scale=0.01),
)


def _needs_pong() -> str:
    if not GOOD_PORT.is_file() or CORRECT not in GOOD_PORT.read_text():
        pytest.skip("the hand-written pong port is not available")
    return GOOD_PORT.read_text()


def test_scripted_agent_repairs_a_planted_bug_from_the_localized_finding(tmp_path: Path) -> None:
    good = _needs_pong()
    repair_prompts: list[str] = []

    def fix_from_repair_prompt(request: ModelRequest) -> ModelResponse:
        first = request.messages[0]
        repair_prompts.append(first.parts[1].text)
        return reply(
            calls=[("edit_file", {"path": "port/pong.py", "old": PLANTED, "new": CORRECT})],
            usage=USAGE,
            turn=3,
        )

    model = ScriptedModel(
        [
            reply(
                calls=[
                    (
                        "write_file",
                        {"path": "port/pong.py", "content": good.replace(CORRECT, PLANTED)},
                    )
                ],
                usage=USAGE,
                turn=1,
            ),
            reply(calls=[("run_verify", {"levels": "0"})], usage=USAGE, turn=2),
            reply("Ported pong; it loads.", usage=USAGE, turn=3),
            # a pass at level 0 alone is not done: reminded, the agent stops anyway
            reply("Ported pong.", usage=USAGE, turn=3),
            fix_from_repair_prompt,
            reply("Fixed the paddle speed.", usage=USAGE, turn=4),
            reply("Fixed it, yes.", usage=USAGE, turn=4),  # after the reminder: not verified
            # the optimize round breaks the port: it must be undone
            reply(
                calls=[
                    (
                        "edit_file",
                        {"path": "port/pong.py", "old": OBSERVE, "new": "def observe_fast("},
                    )
                ],
                usage=USAGE,
                turn=5,
            ),  # fmt: skip
            reply("Renamed for speed.", usage=USAGE, turn=6),
            reply("Renamed it, yes.", usage=USAGE, turn=6),
        ],
        name="scripted-pong",
    )
    ledger_path = tmp_path / "ledger.sqlite"
    job = TranslateJob(
        spec=spec_for_name("pong"),
        model="scripted-pong",
        config=replace(QUICK, optimize_rounds=1, throughput_batch=64),
        budget_usd=Decimal("1"),
        out=tmp_path / "out",
        workspace=tmp_path / "ws",
        job="e2e",
        ledger=ledger_path,
        price=PRICE,
    )
    outcome = run_translate_job(job, model=model)

    result = outcome.result
    assert result.status == "verified", result.message
    assert [it.kind for it in result.iterations] == ["translate", "repair", "optimize"]
    assert result.iterations[0].verdict == "not equivalent"
    assert result.levels_passed == [0, 1, 2]
    translated, repaired, optimized = result.iterations
    assert repaired.verdict == "equivalent" and (repaired.steps_per_second or 0) > 0
    assert optimized.verdict == "not equivalent"
    assert optimized.finding.startswith("undone (L0") and optimized.finding.endswith(
        "back to iteration 2"
    )

    # the repair prompt carries the localized finding: the field, and the lines assigning it
    (prompt,) = repair_prompts
    assert "Fields that differ: paddle_yr" in prompt
    assert "references/pong/pong.c:" in prompt and "env->paddle_yr = clampf(" in prompt
    port_line = next(
        i for i, line in enumerate(good.splitlines(), 1) if line.strip().startswith("paddle_yr = ")
    )
    assert f"port/pong.py:{port_line}: paddle_yr = jnp.clip(" in prompt
    assert str(tmp_path) not in prompt  # prompts never show where the run happens

    # the agent's own run_verify ran the real verifier on its workspace port: level 0 passed,
    # and both the verdict line and the reminder after the agent's summary say what remains
    verify_output = model.requests[2].messages[-1].tool_results[0].content
    assert verify_output.startswith("verdict: equivalent at level 0 only; levels 1-3 not run yet")
    assert "L0 contract: pass" in verify_output
    reminder = model.requests[3].messages[-1].text
    assert "passed levels 0 only" in reminder and 'run_verify at "0-2"' in reminder

    # exact cost: ten calls at 8625 micro-dollars each (every episode's summary came after a
    # reminder: the translation's run_verify passed level 0 only, the others' none)
    with Ledger(ledger_path) as ledger:
        entries = ledger.entries(job="e2e")
        purposes = ["translate 1"] * 4 + ["repair 2"] * 3 + ["optimize 3"] * 3
        assert [e.purpose for e in entries] == purposes
        assert ledger.spent(job="e2e") == Decimal("0.08625")
    assert outcome.cost_usd == Decimal("0.08625")

    landed = (tmp_path / "out" / "pong.py").read_text()
    assert landed == good
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "| verdict | verified |" in provenance
    assert "| levels passed | L0, L1, L2 |" in provenance
    assert declared_made_by(provenance) == "agent"  # the front matter every port declares
    assert "$0.08625" in provenance and "scripted-pong" in provenance
    for n in (1, 2, 3):
        snapshot = tmp_path / "ws" / "iterations" / f"0{n}"
        assert (snapshot / "port" / "pong.py").is_file()
        assert (snapshot / "report.json").is_file() and (snapshot / "transcript.jsonl").is_file()

    # the docs' table of a recorded run, from this workspace: the repair prompt cited the line
    # of the constant the fix changed
    import importlib.util

    where = importlib.util.spec_from_file_location(
        "played_runs", ROOT / "benchmarks" / "played_runs.py"
    )
    assert where is not None and where.loader is not None
    table = importlib.util.module_from_spec(where)
    where.loader.exec_module(table)
    rows = table.run_rows(tmp_path / "ws")
    assert [(r["kind"], r["calls"], r["verify_calls"], r["findings_shown"]) for r in rows] == [
        ("translate", 4, 1, 0),
        ("repair", 3, 0, 1),
        ("optimize", 3, 0, 0),
    ]
    constant = good.splitlines().index(CORRECT) + 1
    assert (rows[0]["named"], rows[1]["named"]) == ("—", f"yes (port/pong.py:{constant})")
    assert [r["fixes"] for r in rows] == [[], ["yes"], []]  # L0 only passed in episode 1
    assert sum(r["cost"] for r in rows) == Decimal("0.08625")
    assert "| 2 | repair | submitted | equivalent | 3 |" in table.markdown(rows, "pong")


def test_budget_stop_keeps_workspace_and_ledger_and_lands_an_unverified_port(
    tmp_path: Path,
) -> None:
    usage = Usage(input_tokens=10_000, output_tokens=4000)  # 0.09 per call at 3/15
    model = ScriptedModel(
        [
            reply(
                calls=[("write_file", {"path": "port/NOTES.md", "content": "plan"})], usage=usage
            ),
            reply("never asked", usage=usage),
        ]
    )
    job = TranslateJob(
        spec=spec_for_name("pong"),
        model="scripted",
        config=QUICK,
        budget_usd=Decimal("0.12"),  # the first call fits; the second could cost 0.09 + 0.06
        out=tmp_path / "out",
        workspace=tmp_path / "ws",
        job="tight",
        ledger=tmp_path / "ledger.sqlite",
        price=PRICE,
    )
    outcome = run_translate_job(job, model=model)
    assert outcome.result.status == "budget" and not outcome.result.verified
    assert len(model.requests) == 1
    assert outcome.cost_usd == outcome.job_spent_usd == Decimal("0.09")
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        assert len(ledger.entries(job="tight")) == 1
    assert (tmp_path / "ws" / "port" / "NOTES.md").read_text() == "plan"
    assert (tmp_path / "ws" / "iterations" / "01" / "port" / "NOTES.md").is_file()
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "NOT VERIFIED (budget:" in provenance and "| levels passed | none |" in provenance
    # what the verifier said about the folder the model left, though the model never saw it
    assert "port/pong.py" in outcome.result.last_verify
    assert outcome.result.last_verify.strip() in provenance


def test_translate_command_replays_a_recorded_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envforge.agents.cassette import RecordingModel
    from envforge.cli import app

    usage = Usage(input_tokens=1000, output_tokens=100)
    cassette = tmp_path / "run.jsonl"
    scripted = ScriptedModel(
        [
            reply(calls=[("list_files", {"path": "."})], usage=usage),
            reply("No port yet.", usage=usage),
            reply("No port yet, as I said.", usage=usage),
        ],
        name="claude-sonnet-4-6",
    )
    args = ["translate", "--ref", str(ROOT / "references/pong/pong.c"), "--max-iters", "1",
            "--levels", "0-2", "--scale", "0.01", "--max-tokens", "4000", "--max-steps", "5",
            "--json"]  # fmt: skip

    def run_once(model: str | None, name: str) -> dict[str, object]:
        where = ["--out", str(tmp_path / name / "out"), "--workspace", str(tmp_path / name / "ws"),
                 "--ledger", str(tmp_path / name / "ledger.sqlite")]  # fmt: skip
        if model is None:  # the recording run: a scripted model behind a recorder
            recorder = RecordingModel(scripted, cassette)
            job = TranslateJob(spec=spec_for_name("pong"), model=recorder.name, config=replace(QUICK, max_iters=1),
                               out=tmp_path / name / "out", workspace=tmp_path / name / "ws",
                               ledger=tmp_path / name / "ledger.sqlite")  # fmt: skip
            return run_translate_job(job, model=recorder).to_dict()
        result = CliRunner().invoke(app, [*args, "--model", model, *where])
        assert isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 1, result.output  # not verified: there is no port
        # off a terminal the run's progress is plain lines, on stderr beside --json
        assert "[episode 1/1 translate] step 1: list_files path=. | calls 1" in result.stderr
        return dict(json.loads(result.stdout))

    recorded = run_once(None, "first")
    replayed = run_once(f"replay:{cassette}", "second")
    assert replayed["status"] == recorded["status"] == "iteration_limit"
    assert replayed["model"] == "claude-sonnet-4-6"
    assert Decimal(str(recorded["cost_usd"])) == Decimal("0.0135")  # 3 x (1000*3 + 100*15) / 1e6
    assert Decimal(str(replayed["cost_usd"])) == 0  # a replay spends nothing

    def without_cost(run: dict[str, object]) -> list[dict[str, object]]:
        iterations = run["iterations"]
        assert isinstance(iterations, list)
        return [
            {k: v for k, v in it.items() if k not in ("cost_usd", "wall_s")} for it in iterations
        ]

    assert without_cost(replayed) == without_cost(recorded)


def test_a_landing_killed_half_way_leaves_a_folder_envforge_can_land_in_again(
    tmp_path: Path,
) -> None:
    """A batch killed while landing a port must resume: `out` is never left part-written
    without PROVENANCE.md (check_out_dir would refuse it as not envforge's)."""
    from envforge.translate.workspace import PROVENANCE, check_out_dir, land_atomically

    out = tmp_path / "generated" / "pong" / "jax-x"

    def write(text: str):  # type: ignore[no-untyped-def]
        def fill(folder: Path) -> None:
            folder.mkdir(parents=True)
            (folder / "pong.py").write_text(text)

        return fill

    def dies_half_way(folder: Path) -> None:
        write("half")(folder)
        raise KeyboardInterrupt  # as if killed before PROVENANCE.md was written

    with pytest.raises(KeyboardInterrupt):
        land_atomically(out, dies_half_way, "p0")
    check_out_dir(out)  # nothing foreign was left at `out`
    land_atomically(out, write("first"), "p1")
    with pytest.raises(KeyboardInterrupt):
        land_atomically(out, dies_half_way, "p2")
    assert (out / "pong.py").read_text() == "first" and (out / PROVENANCE).read_text() == "p1"
    land_atomically(out, write("second"), "p3")
    assert (out / "pong.py").read_text() == "second" and (out / PROVENANCE).read_text() == "p3"
    assert sorted(p.name for p in out.parent.iterdir()) == ["jax-x"]  # leftovers cleared


@pytest.mark.slow  # four L0-L1 verifications of pong: ~100-150 s on two busy cores
def test_a_run_whose_agent_verifies_at_l1_replays_to_the_same_port_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The agent writes the port, runs run_verify at L0-L1 (whose time-budgeted reset sweep gets
    as far as this machine's speed allows), and writes what the verifier said into the port. A
    replay of the cassette must be asked the very same questions and land the same bytes."""
    from envforge.agents.cassette import RecordingModel

    good = _needs_pong()
    usage = Usage(input_tokens=1000, output_tokens=100)

    def note_the_verdict(request: ModelRequest) -> ModelResponse:
        said = request.messages[-1].tool_results[0].content
        l1 = next(line for line in said.splitlines() if line.startswith("L1 "))
        port = good + f"\n# run_verify said: {l1}\n"
        return reply(calls=[("write_file", {"path": "port/pong.py", "content": port})], turn=3)

    script = [
        reply(calls=[("write_file", {"path": "port/pong.py", "content": good})], turn=1),
        reply(calls=[("run_verify", {"levels": "0-1"})], turn=2),
        note_the_verdict,
        reply("Ported; the verifier passed L0-L1.", usage=usage),
        reply("Ported.", usage=usage),  # after the reminder (the last write was not verified)
    ]
    cassette = tmp_path / "run.jsonl"
    config = replace(QUICK, levels=(0, 1), max_iters=1)

    def run(model: str, name: str, live: RecordingModel | None = None) -> Path:
        job = TranslateJob(spec=spec_for_name("pong"), model=model, config=config,
                           out=tmp_path / name / "out", workspace=tmp_path / name / "ws",
                           ledger=tmp_path / "ledger.sqlite", job=name, price=PRICE)  # fmt: skip
        outcome = run_translate_job(job, model=live)
        assert outcome.result.status == "verified", outcome.result.message
        return tmp_path / name / "out" / "pong.py"

    recorded = run("claude-sonnet-4-6", "live", RecordingModel(ScriptedModel(script), cassette))
    replayed = run(f"replay:{cassette}", "replay")
    assert "# run_verify said: L1 properties: pass" in recorded.read_text()
    assert "every seed the reset sweep reached" in recorded.read_text()  # no seed count
    assert replayed.read_bytes() == recorded.read_bytes()
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.spent(job="replay") == 0
        assert {e.model for e in ledger.entries(job="replay")} == {"replay:scripted"}


def test_a_context_overflow_ends_the_episode_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the Anthropic SDK against a local server: the translation episode's second call
    is refused as too long; that port is verified (it fails L0), and the repair episode fixes it.
    The transcript of each episode is on disk before its next call is made."""
    from wire import PROVIDERS, FakeServer

    from envforge.agents.anthropic_model import AnthropicModel
    from envforge.agents.model import RetryPolicy

    good = _needs_pong()
    broken = good.replace(OBSERVE, "def observe_renamed(")
    transcript = tmp_path / "ws" / "iterations" / "02" / "transcript.jsonl"
    p = PROVIDERS["anthropic"]
    server = FakeServer()
    try:
        p.configure(monkeypatch, server.url)
        bill = p.bill(1000, 100)
        server.reply(200, p.ok("", [("c1", "write_file", {"path": "port/pong.py",
                                                           "content": broken})], bill))  # fmt: skip
        server.reply(400, p.error(400, "context"))
        server.reply(529, p.error(529, "overloaded"))  # one wait, reported apart
        server.reply(200, p.ok("", [("c2", "edit_file", {"path": "port/pong.py",
                     "old": "def observe_renamed(", "new": OBSERVE})], bill))  # fmt: skip
        server.reply(200, p.ok("Renamed it back.", [], bill))
        server.reply(200, p.ok("Renamed it back, yes.", [], bill))
        lines_before_each_call: list[int] = []
        responder_seen = server.seen

        model = AnthropicModel(
            "claude-sonnet-4-6", RetryPolicy(attempts=1, initial_delay_s=0.2, jitter=0.0)
        )
        job = TranslateJob(spec=spec_for_name("pong"), model=model.name,
                           config=replace(QUICK, levels=(0,), max_iters=2),
                           out=tmp_path / "out", workspace=tmp_path / "ws",
                           ledger=tmp_path / "ledger.sqlite", job="overflow")  # fmt: skip

        class Watching:
            """Passes calls on, noting how much of the transcript was on disk at each."""

            name = model.name
            inner = model

            def complete(self, request: ModelRequest) -> ModelResponse:
                lines = transcript.read_text().count("\n") if transcript.is_file() else -1
                lines_before_each_call.append(lines)
                return model.complete(request)

        outcome = run_translate_job(job, model=Watching())
    finally:
        server.close()
    result = outcome.result
    assert result.status == "verified", result.message
    first, second = result.iterations
    assert (first.agent_status, first.verdict) == ("context_full", "not equivalent")
    assert first.finding.startswith("L0")
    assert (second.agent_status, second.verdict) == ("submitted", "equivalent")
    assert len(responder_seen) == 6 and outcome.calls == 4  # refused calls were not billed
    assert (first.retry_wait_s, second.retry_wait_s) == (0.0, 0.2)
    assert second.wall_s >= 0.2 and outcome.to_dict()["retry_wait_s"] == 0.2
    # the last verification, which the model never saw (it stopped without run_verify), is
    # in the result and in PROVENANCE.md as run_verify would have shown it
    assert result.last_verify.startswith("verdict: equivalent at level 0 only")
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "## Last verification" in provenance and result.last_verify.strip() in provenance
    assert "| 0 (0 waiting on retries)" not in provenance and "(0 waiting" not in provenance
    # the repair episode's transcript grew before each of its calls: 1, 3, 5 messages
    assert lines_before_each_call[2:] == [1, 3, 5]
