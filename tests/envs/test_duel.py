"""Duel, the demonstration of the rules-text path: a reference accepted from two versions drafted
independently from a rules text (references/duel/README.md). The accepted version passes its
rule cases and the spec's self-check, each version passes the other's rule cases, and the two
agree at levels 0-3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT
from test_rules import envforge

from envforge.backends.recipe import open_driver, reference_recipe
from envforge.init.selfcheck import SelfCheckConfig, self_check
from envforge.rules.cases import load_cases, run_cases
from envforge.rules.text import RulesText
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

DUEL = ROOT / "references" / "duel"
ACCEPTED = f"{DUEL / 'duel.py'}:Duel"
OTHER = f"{DUEL / 'drafts' / 'v2' / 'duel.py'}:Duel"
JAX_PORT = ROOT / "generated" / "duel" / "jax"  # written in an `envforge prompt` workspace
TURN_ANSWER = 82  # RULES.md, Clarification 1: the turn counter has no limit


def test_the_accepted_reference_passes_its_rule_cases() -> None:
    """`rules check duel`: the env's RULES.md, cases.toml and env.toml."""
    result = envforge("rules", "check", "duel", "--json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    cases = json.loads(result.stdout)["reference"]
    assert len(cases) >= 40 and all(case["passed"] for case in cases)
    assert any(TURN_ANSWER in case["rules"] for case in cases)  # the answered question


def test_a_rules_file_without_its_cases_and_spec_is_one_line_and_exit_2() -> None:
    result = envforge("rules", "check", str(DUEL / "RULES.md"), "--spec", str(DUEL / "env.toml"))
    assert result.returncode == 2
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("envforge:")]
    assert "needs --cases and --spec" in line and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("cases", "version"),
    [(DUEL / "cases.toml", OTHER), (DUEL / "drafts" / "v2" / "cases.toml", ACCEPTED)],
    ids=["v1-cases-on-v2", "v2-cases-on-v1"],
)
def test_each_version_passes_the_other_versions_rule_cases(cases: Path, version: str) -> None:
    rules = RulesText.load(DUEL / "RULES.md")
    spec = load_spec(DUEL / "env.toml").model_copy(update={"reference": version})
    driver = open_driver(reference_recipe(spec), True)
    try:
        results = run_cases(driver, spec, load_cases(cases, spec, rules), rules)
    finally:
        driver.close()
    failed = [r.finding.message for r in results if r.finding is not None]
    assert not failed, failed[0]


def test_the_accepted_spec_passes_its_self_check() -> None:
    verdict = self_check(load_spec(DUEL / "env.toml"), SelfCheckConfig(episodes=4, max_steps=200))
    assert verdict.passed, [f.message for f in verdict.findings]


@pytest.mark.slow
def test_the_two_versions_agree_at_levels_0_to_3(tmp_path: Path) -> None:
    """Round 3 of the demonstration, at the default scale: no rule question left."""
    questions = tmp_path / "questions.md"
    result = envforge(
        "rules", "compare", str(DUEL / "RULES.md"), ACCEPTED, OTHER,
        "--spec", str(DUEL / "env.toml"), "--levels", "0-3", "--sandbox", "process",
        "--questions", str(questions),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "agree at levels 0-3" in result.stdout
    assert json.loads(questions.with_suffix(".json").read_text()) == []


def test_the_jax_port_passes_the_contract() -> None:
    """L0 in this process (~15 s of CPU, most of it JAX compiling the step): the shipped port
    builds, honours the API, shapes, dtypes and bounds, and batches deterministically."""
    report = verify(
        load_spec(DUEL / "env.toml"), JAX_PORT, [0], VerifyOptions(scale=0.05, isolate=False)
    )
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]


@pytest.mark.slow
def test_the_jax_port_is_equivalent_at_levels_0_to_3() -> None:
    """The shipped port against the accepted reference, Gamble coins replayed from the tape."""
    report = verify(load_spec(DUEL / "env.toml"), JAX_PORT, [0, 1, 2, 3], VerifyOptions(scale=0.2))
    assert report.verdict == "equivalent", [lv.summary for lv in report.levels]
    assert report.levels[1].stats["draws_accounted"] > 0


@pytest.mark.slow
def test_the_jax_port_passes_every_rule_case_on_the_references_draws() -> None:
    """A case that flips the Gamble coin was written for the reference's generator: the port
    takes the reference's draws of that case as a tape (its own key gave tails: 45/46)."""
    done = envforge(
        "rules", "check", "duel", "--port", str(ROOT / "generated" / "duel" / "jax"),
        "--sandbox", "process",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "port: 46/46 rule cases pass" in done.stdout
