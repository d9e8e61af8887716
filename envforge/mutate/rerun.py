"""Running some mutants of a finished campaign again, apart from it; their outcomes go back.

A campaign's worker has a wall-clock limit (``--time-limit``, doubled once the verify has
reported). On a loaded 2-core machine a survivor's full differential can outlast it: the
mutant is then a survivor of unknown equivalence, and the campaign's kill rate counts it
against the verifier. Re-running that mutant apart from the campaign, with a longer limit,
settles it; the new outcome replaces the old one in the campaign's JSON, marked ``rerun`` (the
reason, the limit, when, and the outcome it replaced), and every rate is computed again from
the outcomes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from envforge.mutate.mutation_report import MutationReport, Outcome

_OUTCOME_FIELDS = {f.name for f in dataclasses.fields(Outcome)}
_KEPT_KEYS = ("command", "target", "measured", "load_before")
"""Keys the results script adds to a campaign's JSON, carried over unchanged."""


def outcome_from_dict(data: dict[str, Any]) -> Outcome:
    return Outcome(**{k: v for k, v in data.items() if k in _OUTCOME_FIELDS})


def report_from_dict(data: dict[str, Any]) -> MutationReport:
    """The report a campaign's JSON was written from (``MutationReport.to_dict``)."""
    outcomes = [outcome_from_dict(m) for m in data["mutants"]]
    run_stillborn = sum(o.status == "stillborn" for o in outcomes)
    return MutationReport(
        env=data["env"],
        side=data["side"],
        files=list(data["files"]),
        levels=list(data["levels"]),
        options=dict(data["options"]),
        generated=int(data["generated"]),
        stillborn=int(data["stillborn"]) - run_stillborn,  # to_dict adds those run
        exempt=int(data.get("exempt", 0)),
        outcomes=outcomes,
        wall_s=float(data.get("wall_s", 0.0)),
        handlers=bool((data.get("handlers") or {}).get("declared", False)),
    )


def put_back(
    campaign: dict[str, Any], again: MutationReport, reason: str, when: str, limit_s: float
) -> dict[str, Any]:
    """``campaign`` (a JSON dict) with the outcomes of ``again`` in place of the same ids;
    rates recomputed. Raises ValueError for an id the campaign did not run."""
    if not again.outcomes:  # ids that name no mutant select none: nothing to record
        raise ValueError(f"no mutant of the {campaign['env']} campaign was re-run")
    report = report_from_dict(campaign)
    index = {o.id: i for i, o in enumerate(report.outcomes)}
    for new in again.outcomes:
        if new.id not in index:
            raise ValueError(f"mutant {new.id} is not in the {campaign['env']} campaign")
        old = report.outcomes[index[new.id]]
        new.rerun = {
            "reason": reason,
            "time_limit_s": limit_s,
            "when": when,
            "campaign_status": old.status,
            "campaign_wall_s": old.wall_s,
            "campaign_error": old.error,
        }
        report.outcomes[index[new.id]] = new
    data = report.to_dict()  # wall_s stays the campaign's; the re-run's is in its entry
    data.update({k: campaign[k] for k in _KEPT_KEYS if k in campaign})
    data["reruns"] = [
        *campaign.get("reruns", []),
        {
            "ids": [o.id for o in again.outcomes],
            "reason": reason,
            "when": when,
            "time_limit_s": limit_s,
            "wall_s": round(again.wall_s, 1),
        },
    ]
    return data
