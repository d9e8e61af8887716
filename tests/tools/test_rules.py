"""`envforge rules`: rule cases that cite the rules text, versions of a reference
compared with the ordinary levels, and each disagreement a rule question quoting the rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from envforge.errors import BadInput
from envforge.rules.citations import citation_map
from envforge.rules.text import RulesText

TEN = ROOT / "tests" / "rules" / "ten"
BUST_LINE = 8  # "A move that takes the total past 10 is a bust: ..."


def envforge(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge.cli", *args],
        cwd=cwd,
        env=dict(os.environ, COLUMNS="200"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_pair_that_differs_on_one_rule_asks_one_question_quoting_that_rule(
    tmp_path: Path,
) -> None:
    """v1 reads the bust rule as written, v2 as the end of the game: one question, the bust
    line quoted for both versions, the shrunk state one move from the bust."""
    questions = tmp_path / "questions.md"
    result = envforge(
        "rules", "compare", str(TEN / "RULES.md"), f"{TEN / 'v1.py'}:Ten", f"{TEN / 'v2.py'}:Ten",
        "--spec", str(TEN / "env.toml"), "--levels", "0-1", "--scale", "0.3",
        "--sandbox", "process", "--questions", str(questions),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    [question] = json.loads(questions.with_suffix(".json").read_text())
    bust = RulesText.load(TEN / "RULES.md").quote([BUST_LINE])[0]
    assert BUST_LINE in question["rules"]
    for answer in question["answers"]:
        assert bust in answer["quoted"], answer
    v1, v2 = (a["outcome"] for a in question["answers"])
    assert (v1["terminated"], v2["terminated"]) == (False, True)
    assert question["state"]["total"] + (2 if question["action"] == 1 else 1) > 10
    assert bust in questions.read_text()


@pytest.mark.slow
def test_versions_that_read_the_rules_alike_agree(tmp_path: Path) -> None:
    """The answered question's repair: v2 with the bust read as written agrees with v1."""
    fixed = tmp_path / "v2.py"
    text = (TEN / "v2.py").read_text()
    wrong = "            return self._get_obs(), -1.0, True, False, {}"
    assert wrong in text
    right = "            self.total = 0\n            return self._get_obs(), -1.0, False, self.moves >= 20, {}"
    fixed.write_text(text.replace(wrong, right))
    questions = tmp_path / "questions.md"
    result = envforge(
        "rules", "compare", str(TEN / "RULES.md"), f"{TEN / 'v1.py'}:Ten", f"{fixed}:Ten",
        "--spec", str(TEN / "env.toml"), "--scale", "0.3", "--sandbox", "process",
        "--questions", str(questions),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert json.loads(questions.with_suffix(".json").read_text()) == []


def test_a_rule_case_a_port_breaks_fails_citing_the_rules_line() -> None:
    result = envforge(
        "rules", "check", str(TEN / "RULES.md"), "--cases", str(TEN / "cases.toml"),
        "--spec", str(TEN / "env.toml"), "--port", str(TEN / "jax_bust_ends"),
        "--sandbox", "process", "--json",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert all(case["passed"] for case in out["reference"])
    [failed] = [case for case in out["port"] if not case["passed"]]
    assert failed["rules"] == [BUST_LINE]
    finding = failed["finding"]
    assert finding["check"] == "rule_case" and finding["fields"] == ["total"]
    assert "L8: A move that takes the total past 10 is a bust" in finding["message"]


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ('rules = "L8"\nset = { score = 1 }\naction = 0\nexpect = { total = 1 }', "'score'"),
        ('rules = "L99"\naction = 0\nexpect = { total = 1 }', "cites L99"),
        ('rules = "L8"\naction = 0', "needs an 'action' and an 'expect'"),
        ('rules = "L8"\naction = 0\nexpect = { colour = 1 }', "'colour'"),
    ],
)
def test_a_bad_rule_case_is_one_line_and_exit_2(tmp_path: Path, case: str, says: str) -> None:
    cases = tmp_path / "cases.toml"
    cases.write_text(f"[[case]]\nname = 'bad'\n{case}\n")
    result = envforge(
        "rules", "check", str(TEN / "RULES.md"), "--cases", str(cases),
        "--spec", str(TEN / "env.toml"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("envforge:")]
    assert says in line and "Traceback" not in result.stderr


def test_a_citation_covers_its_line_or_the_block_below_it() -> None:
    source = "x = 1\n# L3-4\na = 1\nb = 2  # L9\n\nc = 3\n"
    assert citation_map(source) == {3: [3, 4], 4: [3, 4, 9]}


def test_an_answer_becomes_a_citable_clarification(tmp_path: Path) -> None:
    rules = tmp_path / "RULES.md"
    shutil.copy(TEN / "RULES.md", rules)
    line = RulesText.load(rules).add_clarification("Question 1", "A bust  does not end the game.")
    again = RulesText.load(rules)
    assert again.line(line) == "- Question 1: A bust does not end the game."
    assert "## Clarifications" in again.lines
    with pytest.raises(BadInput, match="has no line"):
        again.line(line + 5)


def test_the_draft_workspace_holds_the_numbered_rules_and_a_check_that_runs_the_cases(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    result = envforge(
        "rules", "draft", str(TEN / "RULES.md"), "--name", "ten", "--out", str(ws),
        "--spec", str(TEN / "env.toml"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    task = (ws / "AGENTS.md").read_text()
    assert "L8  A move that takes the total past 10 is a bust" in task
    assert 'reference = "ten.py:Ten"' in (ws / "env.toml").read_text()
    assert "v1.py" not in task and "v2.py" not in task  # it sees the rules, not other versions
    not_yet = subprocess.run([str(ws / "check")], capture_output=True, text=True, timeout=300)
    assert not_yet.returncode == 2 and "cases.toml" in not_yet.stdout
    shutil.copy(TEN / "v1.py", ws / "ten.py")
    shutil.copy(TEN / "cases.toml", ws / "cases.toml")
    done = subprocess.run([str(ws / "check")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3/3 rule cases pass" in done.stdout


def _drafting_script(tmp_path: Path) -> Path:
    """Two versions as a scripted model writes them: v1 (the bust read as written, with the
    spec) and v2 (a bust ends the game; only the cases it passes)."""
    spec = (
        (TEN / "env.toml")
        .read_text()
        .replace('reference = "v1.py:Ten"', 'reference = "ten.py:Ten"')
    )
    cases = (TEN / "cases.toml").read_text()
    v2_cases = "\n[[case]]".join(part for part in cases.split("\n[[case]]") if "bust" not in part)
    usage = {"input_tokens": 3000, "output_tokens": 800}

    def version(source: str, files: dict[str, str]) -> list[dict[str, object]]:
        calls = [["write_file", {"path": "ten.py", "content": source}]]
        calls += [["write_file", {"path": p, "content": c}] for p, c in files.items()]
        calls.append(["run_verify", {"levels": "0"}])
        return [{"calls": calls, "usage": usage}, {"text": "Drafted.", "usage": usage}]

    script = {
        "model": "claude-sonnet-4-6",
        "responses": version((TEN / "v1.py").read_text(), {"env.toml": spec, "cases.toml": cases})
        + version((TEN / "v2.py").read_text(), {"cases.toml": v2_cases}),
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return path


@pytest.mark.slow
def test_two_versions_drafted_by_the_agent_loop_are_priced_and_compared(tmp_path: Path) -> None:
    """The pipeline end to end with a scripted model: two versions drafted in their own
    workspaces (v2 given v1's spec), both passing their own cases, priced in one ledger job;
    their comparison asks the bust question."""
    out = tmp_path / "drafts"
    result = envforge(
        "rules", "draft", str(TEN / "RULES.md"), "--name", "ten", "--out", str(out),
        "--model", f"scripted:{_drafting_script(tmp_path)}", "--versions", "2",
        "--ledger", str(tmp_path / "ledger.sqlite"),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("rule cases pass") == 2 and "2 model calls" in result.stdout
    assert "$0.0" in result.stdout and "$0 " not in result.stdout  # four priced calls
    assert (out / "v2" / "env.toml").read_text().startswith("# Ten")  # v1's spec, given to v2
    assert "bust" not in (out / "v2" / "cases.toml").read_text()
    questions = tmp_path / "questions.md"
    compared = envforge(
        "rules", "compare", str(TEN / "RULES.md"), f"{out}/v1/ten.py:Ten", f"{out}/v2/ten.py:Ten",
        "--spec", str(out / "v1" / "env.toml"), "--levels", "0-1", "--scale", "0.3",
        "--sandbox", "process", "--questions", str(questions),
    )  # fmt: skip
    assert compared.returncode == 1, compared.stderr[-2000:]
    [question] = json.loads(questions.with_suffix(".json").read_text())
    assert BUST_LINE in question["rules"]


def test_a_repair_workspace_starts_from_the_version_and_the_questions(tmp_path: Path) -> None:
    """`rules draft --from V --questions Q`: one step to the next round's repair (the version's
    own files and the round's questions, never the other version)."""
    version = tmp_path / "v2"
    version.mkdir()
    shutil.copy(TEN / "v2.py", version / "ten.py")
    shutil.copy(TEN / "cases.toml", version / "cases.toml")
    asked = tmp_path / "questions.md"
    asked.write_text("# Rule questions\n\n1. L8: does a bust end the game?\n")
    ws = tmp_path / "ws"
    result = envforge(
        "rules", "draft", str(TEN / "RULES.md"), "--name", "ten", "--out", str(ws),
        "--spec", str(TEN / "env.toml"), "--from", str(version), "--questions", str(asked),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (ws / "ten.py").read_text() == (TEN / "v2.py").read_text()
    assert (ws / "cases.toml").is_file()
    assert (ws / "QUESTIONS-ASKED.md").read_text() == asked.read_text()
    task = (ws / "AGENTS.md").read_text()
    assert "repair your version" in task and "QUESTIONS-ASKED.md" in task
    assert "v1.py" not in task
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = envforge(
        "rules", "draft", str(TEN / "RULES.md"), "--name", "ten", "--out", str(tmp_path / "w2"),
        "--from", str(empty),
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"envforge: error: --from {empty}: no ten.py there to start from"
    ]
