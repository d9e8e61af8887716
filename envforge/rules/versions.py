"""N-version references: independent implementations of one rules text, verified against each
other with the ordinary levels, each disagreement turned into a rule question.

Version 1 is the reference side; every other version takes the port side through the same door
a port does (``verify(..., other=...)``: the sandbox the options name). All versions implement
one spec (the state, action and observation layout), drafted once; only their logic is
independent, so any difference the levels find is a difference in how the rules were read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from envforge.backends.recipe import Recipe, open_driver, reference_recipe
from envforge.errors import BadInput
from envforge.rules.questions import RuleQuestion, ask
from envforge.rules.text import RulesText
from envforge.sandbox.driver import open_sandboxed
from envforge.sandbox.select import open_sandbox
from envforge.spec import EnvSpec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.verdict import Report


@dataclass(frozen=True)
class Version:
    label: str
    reference: str
    """``path/to/file.py:Class``"""

    @property
    def source(self) -> Path:
        return Path(self.reference.rsplit(":", 1)[0]).resolve()


@dataclass
class Comparison:
    versions: list[Version]
    reports: dict[str, Report] = field(default_factory=dict)
    questions: list[RuleQuestion] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return bool(self.reports) and all(r.passed for r in self.reports.values())


def parse_versions(texts: list[str]) -> list[Version]:
    if len(texts) < 2:
        raise BadInput("compare needs two versions or more (file.py:Class each)")
    versions = []
    for i, text in enumerate(texts, 1):
        path, sep, name = text.rpartition(":")
        if not sep or not path.endswith(".py") or not name.isidentifier():
            raise BadInput(f"version {i}: expected path/to/file.py:Class, got {text!r}")
        if not Path(path).is_file():
            raise BadInput(f"version {i}: file not found: {path}")
        where = Path(path).resolve()
        versions.append(Version(f"v{i} ({where.parent.name}/{where.name})", f"{where}:{name}"))
    return versions


def spec_for(spec: EnvSpec, version: Version) -> EnvSpec:
    return spec.model_copy(update={"reference": version.reference})


def version_recipe(spec: EnvSpec, version: Version) -> Recipe:
    """A version as a Python reference would be built, named by the host; its failures name
    the version (it takes the port's side: a failure of it is no reference error)."""
    own = spec_for(spec, version)
    if own.reference_kind != "python":
        raise BadInput(f"{version.label}: a version is a Python class (file.py:Class)")
    return replace(reference_recipe(own), label=version.label)


def compare(
    spec: EnvSpec,
    versions: list[Version],
    rules: RulesText,
    levels: list[int],
    options: VerifyOptions,
) -> Comparison:
    """Verify each version after the first against the first; ask one rule question per pair
    that disagrees (its first finding, already shrunk by the level that found it)."""
    result = Comparison(versions)
    base = spec_for(spec, versions[0])
    for other in versions[1:]:
        report = verify(base, other.source, levels, options, other=version_recipe(spec, other))
        result.reports[other.label] = report
        finding = next((f for lv in report.levels for f in lv.findings), None)
        # a version that crashed or broke the contract is repaired, not asked about
        if report.verdict != "not equivalent" or finding is None or not finding.actions:
            continue
        first = open_driver(version_recipe(spec, versions[0]), True)
        pair = [(versions[0].label, first, versions[0].source)]
        try:
            sandbox = open_sandbox(options.sandbox)
            second = open_sandboxed(version_recipe(spec, other), sandbox)
        except BaseException:
            first.close()
            raise
        pair.append((other.label, second, other.source))
        try:
            number = 1 + len(result.questions)
            result.questions.append(ask(number, spec, finding, pair, rules))
        finally:
            for _, driver, _ in pair:
                driver.close()
    return result
