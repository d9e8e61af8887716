"""Findings grouped by cause, so that one run names every distinct difference once.

A step that differs has a *cause*: the first state field (in the spec's order) that differs
after it, or, when the states agree, each of reward, terminated, truncated and the observation
that differs on its own (equal states with different observations are the port's ``observe``;
a different state's observation follows from the state and is not a cause of its own); a draw
that does not account is ``rng.tape``; a reset that differs is ``reset:<field>``. A level keeps
one finding per cause (the first, or hypothesis' shrunk one) and counts the transitions that
showed it; the report merges a cause's findings across levels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from envforge.spec import EnvSpec
from envforge.verify.findings import Finding, to_jsonable

if TYPE_CHECKING:
    from envforge.verify.tape import PairStep

NON_STATE_KEYS = ("reward", "terminated", "truncated", "obs")
MAX_GROUPS = 12
"""Causes a level keeps apart; past this many, further ones only add to the count of others
(a port this far off needs the first ones fixed before more are worth a search)."""


def causes_of(spec: EnvSpec, keys: list[str], tape_bad: bool = False) -> list[str]:
    """The causes of one env's differing ``keys`` (see the module docstring)."""
    if tape_bad:
        return ["rng.tape"]
    fields = set(keys)
    state = [f.name for f in spec.state if f.name in fields]
    if state:
        return [state[0]]
    if "terminated" in fields:  # a port that ends the episode differently truncates it too
        fields.discard("truncated")
    return [k for k in NON_STATE_KEYS if k in fields] or list(keys[:1])


def cause_keys(spec: EnvSpec, cause: str, keys: list[str]) -> list[str]:
    """The keys a cause's finding names: all of them for a state cause (what followed from it
    included), only its own for a reward, flag or observation cause."""
    if cause in NON_STATE_KEYS:
        return [cause]
    return keys


def finding_cause(finding: Finding) -> str:
    """A finding's cause: the one its level recorded, else from its check and fields (the
    first state field it names: levels list them in the spec's order)."""
    recorded = finding.extra.get("cause")
    if isinstance(recorded, str):
        return recorded
    if finding.check.startswith("reset"):
        return "reset:" + ",".join(finding.fields[:1])
    if finding.check == "rng.tape":
        return "rng.tape"
    state = [k for k in finding.fields if k not in NON_STATE_KEYS]
    own = [k for k in NON_STATE_KEYS if k in finding.fields]
    return (state or own or [finding.check])[0]


def rank(cause: str, spec: EnvSpec | None = None) -> tuple[int, int]:
    """Most fundamental first: resets, then draws and state fields (in the spec's order), then
    reward and flags, then the observation (which a state cause may explain)."""
    if cause.startswith("reset:"):
        return (0, 0)
    if cause == "rng.tape":  # a draw that does not account: what differs after it follows
        return (1, -1)
    if cause in NON_STATE_KEYS:
        return (2 + (cause == "obs"), NON_STATE_KEYS.index(cause))
    names = [f.name for f in spec.state] if spec is not None else []
    return (1, names.index(cause) if cause in names else len(names))


@dataclass
class Group:
    """One cause: its representative finding and how many compared transitions showed it."""

    cause: str
    finding: Finding
    count: int = 1
    levels: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The group as JSON takes it (a finding's values may be numpy scalars and arrays)."""
        f = self.finding
        return to_jsonable(
            {
                "cause": self.cause,
                "fields": f.fields,
                "check": f.check,
                "level": f.level,
                "levels": self.levels or [f.level],
                "count": self.count,
                "message": f.message,
                "minimal_input": {
                    "seed": f.seed,
                    "step": f.step,
                    "state_before": f.state_before,
                    "actions": f.actions,
                },
                "expected": f.expected,
                "actual": f.actual,
                "port_lines": [str(loc) for loc in f.port_lines],
                "reference_lines": [str(loc) for loc in f.reference_lines],
                "explanations": f.extra.get("explanations", []),
            }
        )


class Collector:
    """A level's groups as it finds them: one finding per cause, with counts."""

    def __init__(self, spec: EnvSpec, fail_fast: bool = False) -> None:
        self.spec = spec
        self.fail_fast = fail_fast
        self.groups: dict[str, Group] = {}

    def known(self) -> set[str]:
        return set(self.groups)

    def full(self) -> bool:
        """No more search is wanted: one group under ``--fail-fast``, or the cap."""
        return bool(self.groups) and (self.fail_fast or len(self.groups) >= MAX_GROUPS)

    def add(self, cause: str, finding: Finding | None, count: int = 1) -> None:
        """Count ``cause``; keep ``finding`` for it if it is new (built lazily by the caller:
        pass None for a known cause)."""
        group = self.groups.get(cause)
        if group is not None:
            group.count += count
        elif finding is not None and len(self.groups) < MAX_GROUPS:
            finding.extra["cause"] = cause
            self.groups[cause] = Group(cause, finding, count, [finding.level])

    def findings(self) -> list[Finding]:
        """The groups' findings, most fundamental first, each with its count."""
        ordered = sorted(self.groups.values(), key=lambda g: rank(g.cause, self.spec))
        for group in ordered:
            group.finding.extra["count"] = group.count
        return [g.finding for g in ordered]


def report_groups(findings: list[Finding]) -> list[Group]:
    """A run's findings merged by cause across levels (the lowest level's finding kept), most
    fundamental first."""
    merged: dict[str, Group] = {}
    for finding in findings:
        cause = finding_cause(finding)
        count = int(finding.extra.get("count", 1))
        group = merged.get(cause)
        if group is None:
            merged[cause] = Group(cause, finding, count, [finding.level])
        else:
            group.count += count
            if finding.level not in group.levels:
                group.levels.append(finding.level)
    return sorted(merged.values(), key=lambda g: rank(g.cause))


def new_causes(spec: EnvSpec, pair: PairStep, known: set[str]) -> bool:
    """Whether some env of a compared batch differs by a cause not in ``known``."""
    return any(c not in known for _, c, _ in pair_causes(spec, pair))


def pair_causes(spec: EnvSpec, pair: PairStep) -> list[tuple[int, str, list[str]]]:
    """(env, cause, the keys its finding names) for every differing env of a compared batch."""
    out = []
    for i in np.flatnonzero(pair.mismatch):
        keys = pair.diff.keys_at(int(i))
        taped = pair.tape_bad is not None and bool(pair.tape_bad[i])
        for cause in causes_of(spec, keys, taped):
            out.append((int(i), cause, cause_keys(spec, cause, keys)))
    return out


def collect_pair(
    groups: Collector,
    pair: PairStep,
    build: Callable[[int, list[str]], Finding],
    counted: bool = True,
) -> bool:
    """Add a compared batch's differing envs to ``groups``: a new cause gets the finding
    ``build(env, keys)``, a known one its count (``counted=False``: a shrinker's replay, whose
    envs are not new transitions). True when some cause was new."""
    new = False
    for i, cause, keys in pair_causes(groups.spec, pair):
        if cause in groups.groups:
            if counted:
                groups.add(cause, None)
        elif not groups.full():
            groups.add(cause, build(i, keys))
            new = True
    return new
