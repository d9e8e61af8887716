"""Merge mutation campaigns run on the same port with the same verifier options into one report.

    .venv/bin/python benchmarks/merge_mutation_runs.py docs/mutate/battle.json \\
        run1.json run2.json --command "what was run, in words"

A campaign is one process: stopped early (a loaded machine, a deadline), it reports nothing.
Run in parts (``envforge mutate <env> --mutant ...`` on disjoint sets of mutants), the parts are
merged here: every outcome kept as its run judged it, the totals recomputed by
``MutationReport.to_dict``, each part's command, date, load and wall time kept under ``runs``.
Refuses parts that disagree on the env, side, files, levels or verifier options (other than the
sample size), or that ran a mutant twice.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from envforge.mutate.mutation_report import MutationReport, Outcome

SAME = ("env", "side", "files", "levels", "generated")
OPTION_EXCEPTIONS = ("limit", "parallel", "seed_sweep_plan")
"""Options that may differ between parts: how many were sampled, how many ran at once."""


def merge(parts: list[dict[str, Any]], command: str) -> dict[str, Any]:
    first = parts[0]
    for part in parts[1:]:
        for key in SAME:
            if part[key] != first[key]:
                raise SystemExit(f"parts differ in {key}: {first[key]!r} vs {part[key]!r}")
        a = {k: v for k, v in first["options"].items() if k not in OPTION_EXCEPTIONS}
        b = {k: v for k, v in part["options"].items() if k not in OPTION_EXCEPTIONS}
        if a != b:
            raise SystemExit(f"parts differ in verifier options: {a} vs {b}")
    outcomes = [Outcome(**m) for part in parts for m in part["mutants"]]
    ids = [o.id for o in outcomes]
    if len(ids) != len(set(ids)):
        raise SystemExit("a mutant appears in more than one part")
    report = MutationReport(
        env=first["env"],
        side=first["side"],
        files=first["files"],
        levels=first["levels"],
        options={**first["options"], "limit": None, "merged_parts": len(parts)},
        generated=first["generated"],
        # set aside at generation (the same for every part): the report adds those run
        stillborn=first["stillborn"] - sum(m["status"] == "stillborn" for m in first["mutants"]),
        outcomes=outcomes,
        wall_s=sum(p["wall_s"] for p in parts),
    )
    data = report.to_dict()
    data["command"] = command
    data["target"] = first.get("target", "jax")
    data["measured"] = " and ".join(str(p.get("measured", "?")) for p in parts)
    data["load_before"] = first.get("load_before", [0.0, 0.0, 0.0])
    data["runs"] = [
        {
            "command": p.get("command", ""),
            "measured": p.get("measured"),
            "load_before": p.get("load_before"),
            "wall_s": p["wall_s"],
            "mutants": [m["id"] for m in p["mutants"]],
        }
        for p in parts
    ]
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("parts", nargs="+")
    parser.add_argument("--command", required=True, help="the merged campaign, in words")
    args = parser.parse_args()
    parts = [json.loads(Path(p).read_text()) for p in args.parts]
    data = merge(parts, args.command)
    Path(args.out).write_text(json.dumps(data, indent=1))
    print(
        f"{data['run']} mutants, kill rate {data['kill_rate']}, localization "
        f"{data['localization']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
