"""Rule questions: a disagreement between two versions, shrunk to one state and one action, put
to a person with what each version does there and the rules lines each relied on.

The state is the finding's ``state_before`` (the state the diverging step started from) or, when
a finding has none, the reset of its seed replayed along its actions; each version then steps
that one state with its line coverage on, so the lines it executed name the rules it cited
(``citations.py``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition
from envforge.errors import DriverFailure
from envforge.rules.citations import cited_by_run
from envforge.rules.text import RulesText
from envforge.spec import EnvSpec
from envforge.verify.findings import Finding, to_jsonable


@dataclass
class VersionAnswer:
    version: str
    outcome: dict[str, Any]
    rules: list[int]
    quoted: list[str]


@dataclass
class RuleQuestion:
    number: int
    level: int
    check: str
    finding: str
    state: dict[str, Any]
    action: Any
    answers: list[VersionAnswer] = field(default_factory=list)

    @property
    def rules(self) -> list[int]:
        return sorted({n for a in self.answers for n in a.rules})

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable(asdict(self))
        data["rules"] = self.rules
        return dict(data)


def _batch(spec: EnvSpec, single: dict[str, Any]) -> State:
    return {f.name: np.asarray(single[f.name], dtype=f.dtype)[None] for f in spec.state}


def start_of(spec: EnvSpec, finding: Finding, first: Driver) -> tuple[State, Any]:
    """The state the diverging step started from and its action."""
    actions = list(finding.actions)
    if not actions:
        raise ValueError("the finding names no action")
    if finding.state_before is not None:
        return _batch(spec, finding.state_before), actions[-1]
    state = first.reset(np.array([finding.seed or 0], np.uint32))
    for action in actions[:-1]:
        state = first.step(state, np.asarray([action], spec.action.dtype)).state
    return state, actions[-1]


def _outcome(tr: Transition, keys: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {k: tr.state[k][0] for k in keys if k in tr.state}
    if "obs" in keys:  # a difference only the observation shows: show it
        out["obs"] = tr.obs[0]
    out.update(
        reward=float(tr.reward[0]),
        terminated=bool(tr.terminated[0]),
        truncated=bool(tr.truncated[0]),
    )
    return dict(to_jsonable(out))


def step_with_citations(
    driver: Driver, source: Path, spec: EnvSpec, state: State, action: Any
) -> tuple[Transition, list[int]]:
    """One step of one version from ``state``, and the rules lines its executed code cites:
    those of the lines the step ran, less those that writing the state in and reading its
    observation ran too (a reference driver loads a state through the class's ``reset``)."""
    started = driver.coverage_start()
    driver.observe(state)
    loading = driver.coverage_read() if started else None
    started = started and driver.coverage_start()
    actions = np.asarray([action], spec.action.dtype)
    if spec.rng.step != "none":  # draws inside step: from a seed, no tape
        tr, _ = driver.step_draws(state, actions, np.zeros(1, np.uint64), None)
    else:
        tr = driver.step(state, actions)
    coverage = driver.coverage_read() if started else None
    stepped = cited_by_run(coverage, [source])
    loaded = set(cited_by_run(loading, [source]))
    return tr, [n for n in stepped if n not in loaded]


def ask(
    number: int,
    spec: EnvSpec,
    finding: Finding,
    versions: list[tuple[str, Driver, Path]],
    rules: RulesText,
) -> RuleQuestion:
    """The rule question a finding between ``versions[0]`` and another version asks."""
    state, action = start_of(spec, finding, versions[0][1])
    single = {k: v[0] for k, v in state.items()}
    question = RuleQuestion(
        number, finding.level, finding.check, finding.message, to_jsonable(single), action
    )
    keys = list(finding.fields) or [f.name for f in spec.state]
    for label, driver, source in versions:
        try:
            tr, cited = step_with_citations(driver, source, spec, state, action)
        except DriverFailure as exc:  # a version that raises there: that is its answer
            question.answers.append(VersionAnswer(label, {"raised": str(exc)}, [], []))
            continue
        question.answers.append(VersionAnswer(label, _outcome(tr, keys), cited, rules.quote(cited)))
    return question


def render(question: RuleQuestion, rules: RulesText) -> str:
    """A question as markdown, for a person to answer under ``## Clarifications``."""
    state = ", ".join(f"{k}={v}" for k, v in question.state.items())
    lines = [
        f"## Question {question.number}",
        "",
        f"The versions disagree (L{question.level} `{question.check}`).",
        "",
        f"- state: {state}",
        f"- action: {question.action}",
        "",
    ]
    for answer in question.answers:
        outcome = ", ".join(f"{k}={v}" for k, v in answer.outcome.items())
        lines.append(f"**{answer.version}** gives {outcome}; it relied on:")
        lines += [f"> {q}" for q in answer.quoted] or ["> (no rules line cited by the code it ran)"]
        lines.append("")
    in_play = rules.quote(question.rules)
    if in_play:
        lines.append("Rules lines in play: " + ", ".join(f"L{n}" for n in question.rules) + ".")
    lines.append(
        f"Answer under `## Clarifications` in {rules.path.name} (what should happen here and "
        "why), repair the versions, and compare again."
    )
    return "\n".join(lines) + "\n"


def write_questions(path: Path, questions: list[RuleQuestion], rules: RulesText) -> None:
    """``questions.md`` for people and ``questions.json`` beside it."""
    body = "\n".join(render(q, rules) for q in questions) if questions else "No questions.\n"
    path.write_text(f"# Rule questions on {rules.path.name}\n\n{body}")
    path.with_suffix(".json").write_text(
        json.dumps([q.to_dict() for q in questions], indent=2) + "\n"
    )
