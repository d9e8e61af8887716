"""Rule cases: small scenarios, each quoting the lines of the rules text it checks.

A case file (``cases.toml``) holds ``[[case]]`` tables::

    [[case]]
    name = "landing past ten loses"
    rules = "L9"                 # the lines this case checks (L9, L9-10, or a list)
    seed = 0                     # reset seed (default 0)
    set = { total = 9 }          # state fields written over the reset state
    action = 2
    expect = { total = 11, reward = -1.0, terminated = true }

``expect`` names state fields (after the step), ``reward``, ``terminated``, ``truncated`` or
``obs``. Integers and booleans must match exactly, floats to 1e-6. A case runs against any
implementation of the env through its driver (a reference, a port in its sandbox, one version of
a drafted reference); a failed case is a ``rule_case`` finding that quotes the rules lines.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, Transition
from envforge.errors import BadInput
from envforge.rules.text import RulesText, parse_citations
from envforge.spec import EnvSpec
from envforge.untrusted.input_files import load_toml
from envforge.verify.findings import Finding

OUTCOMES = ("reward", "terminated", "truncated", "obs")
MAX_CASES = 500


@dataclass(frozen=True)
class RuleCase:
    name: str
    rules: list[int]
    action: Any
    set: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


@dataclass
class CaseResult:
    case: RuleCase
    passed: bool
    finding: Finding | None = None
    inputs: CaseInputs | None = None
    """The state stepped and the draws the reference made (for a port's run of the case)."""


@dataclass
class CaseInputs:
    state: dict[str, np.ndarray]
    tape: Any = None
    """The reference's draw log of the step (``[rng] step`` specs), replayed to a port."""


def _citations(value: Any, where: str) -> list[int]:
    if isinstance(value, str):
        lines = parse_citations(value)
    elif isinstance(value, list) and all(isinstance(v, int | str) for v in value):
        lines = [n for v in value for n in (parse_citations(v) if isinstance(v, str) else [v])]
    else:
        raise BadInput(f"{where}: 'rules' must be like \"L9\" or [9, 10]")
    if not lines:
        raise BadInput(f"{where}: 'rules' cites no line (write e.g. rules = \"L9\")")
    return lines


def load_cases(path: str | Path, spec: EnvSpec, rules: RulesText) -> list[RuleCase]:
    """The cases of ``path``, each checked against the spec and the rules text (bad input: one
    line naming the case)."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"rule cases not found: {path}")
    try:  # a regular file, size-capped, nesting bounded (input_files.py)
        data = load_toml(path, "rule cases")
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path.name}: not valid TOML: {exc}") from None
    tables = data.get("case", [])
    if not isinstance(tables, list) or not tables:
        raise BadInput(f"{path.name}: no [[case]] tables")
    if len(tables) > MAX_CASES:
        raise BadInput(f"{path.name}: {len(tables)} cases (at most {MAX_CASES})")
    fields = {f.name for f in spec.state}
    cases = []
    for i, table in enumerate(tables, 1):
        name = str(table.get("name") or f"case {i}")
        where = f"{path.name}, case {name!r}"
        unknown = set(table) - {"name", "rules", "seed", "set", "action", "expect"}
        if unknown:
            raise BadInput(f"{where}: unknown key {sorted(unknown)[0]!r}")
        if "action" not in table or not table.get("expect"):
            raise BadInput(f"{where}: needs an 'action' and an 'expect' table")
        lines = _citations(table.get("rules"), where)
        rules.check_citations(lines, where)
        written = dict(table.get("set", {}))
        expect = dict(table["expect"])
        for key in written:
            if key not in fields:
                raise BadInput(f"{where}: set names {key!r}, not a state field of the spec")
        for key in expect:
            if key not in fields and key not in OUTCOMES:
                raise BadInput(f"{where}: expect names {key!r}, not a state field or outcome")
        seed = table.get("seed", 0)
        if not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise BadInput(f"{where}: seed must be an integer in [0, 2^32)")
        cases.append(RuleCase(name, lines, table["action"], written, expect, seed))
    return cases


def _write(state: dict[str, np.ndarray], key: str, value: Any, where: str) -> None:
    column = state[key]
    try:
        row = np.asarray(value, dtype=column.dtype)
        column[0] = np.broadcast_to(row, column.shape[1:]) if row.ndim == 0 else row
    except (ValueError, TypeError, OverflowError) as exc:
        raise BadInput(
            f"{where}: set.{key} = {value!r} does not fit {column.dtype}{list(column.shape[1:])}: {exc}"
        ) from None


def _actual(tr: Transition, key: str) -> np.ndarray:
    if key in OUTCOMES:
        return np.asarray(getattr(tr, key)[0])
    return np.asarray(tr.state[key][0])


def matches(expected: Any, actual: np.ndarray) -> bool:
    want = np.asarray(expected)
    if want.shape != actual.shape and want.ndim != 0:
        return False
    if actual.dtype.kind == "f" or want.dtype.kind == "f":
        return bool(np.allclose(actual.astype(np.float64), want.astype(np.float64), 1e-6, 1e-6))
    return bool(np.array_equal(actual, np.broadcast_to(want, actual.shape)))


def run_case(
    driver: Driver,
    spec: EnvSpec,
    case: RuleCase,
    rules: RulesText,
    given: CaseInputs | None = None,
) -> CaseResult:
    """``given``: the reference's run of the case, whose state a port steps from and whose
    draws it takes as a tape (a port's own generator would deal other cards than the seed the
    case was written for)."""
    where = f"case {case.name!r}"
    if given is not None:
        state = {k: np.array(v, copy=True) for k, v in given.state.items()}
    else:
        reset = driver.reset(np.array([case.seed], np.uint32))
        state = {k: np.array(v, copy=True) for k, v in reset.items()}
        for key, value in case.set.items():
            _write(state, key, value, where)
    inputs = CaseInputs({k: np.array(v, copy=True) for k, v in state.items()})
    actions = np.asarray([case.action], dtype=spec.action.dtype)
    if spec.rng.step != "none":  # draws inside step: from the case's seed, or the reference's
        seeds = np.array([case.seed], dtype=np.uint64)
        tape = given.tape if given is not None else None
        tr, inputs.tape = driver.step_draws(state, actions, seeds, tape)
    else:
        tr = driver.step(state, actions)
    wrong = {k: v for k, v in case.expect.items() if not matches(v, _actual(tr, k))}
    if not wrong:
        return CaseResult(case, True, inputs=inputs)
    got = {k: _actual(tr, k).tolist() for k in wrong}
    quoted = "; ".join(rules.quote(case.rules))
    finding = Finding(
        level=-1,
        check="rule_case",
        message=(
            f"rule case {case.name!r} fails on {driver.describe()}: expected "
            f"{', '.join(f'{k}={wrong[k]!r}' for k in wrong)}, got "
            f"{', '.join(f'{k}={got[k]!r}' for k in got)} (rules {quoted})"
        ),
        fields=[k for k in wrong if k not in OUTCOMES],
        seed=case.seed,
        actions=[case.action],
        state_before={k: v[0].tolist() for k, v in state.items()},
        expected={k: wrong[k] for k in wrong},
        actual=got,
        extra={"rules": case.rules, "quoted": rules.quote(case.rules)},
    )
    return CaseResult(case, False, finding, inputs)


def run_cases(
    driver: Driver,
    spec: EnvSpec,
    cases: list[RuleCase],
    rules: RulesText,
    reference: list[CaseResult] | None = None,
) -> list[CaseResult]:
    """Every case on ``driver``; for a port, ``reference`` is the reference's results, whose
    states and draws the port's runs take."""
    if reference is None:
        return [run_case(driver, spec, case, rules) for case in cases]
    return [
        run_case(driver, spec, case, rules, done.inputs)
        for case, done in zip(cases, reference, strict=True)
    ]
