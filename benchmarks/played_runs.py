"""The table docs/TRANSLATE.md shows for a recorded translate run, from the run's workspace.

    python benchmarks/played_runs.py .envforge/runs/<run> [--name uno-rust]

Per episode (``iterations/NN``: cost.json, transcript.jsonl, the port snapshot): kind, agent
status, verdict, model calls, tokens, dollars, run_verify calls, findings shown (the repair
prompt's, and each run_verify result that was not a pass), and for a repair episode whether the
finding named a port line the episode then changed: the port lines its prompt cites
(``port/<file>:<line>``) against the lines that differ between the port it started from (the
snapshot before) and the port it left. A replay of the run's cassette rebuilds the workspace,
so the table can be made again from the committed cassette alone.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

CITED = re.compile(r"(port/[^\s:`'\"]+):(\d+)")


def _messages(folder: Path) -> list[dict[str, Any]]:
    path = folder / "transcript.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _port_files(folder: Path) -> dict[str, list[str]]:
    port = folder / "port"
    if not port.is_dir():
        return {}
    return {
        f"port/{p.relative_to(port)}": p.read_text(errors="replace").splitlines()
        for p in sorted(port.rglob("*"))
        if p.is_file()
    }


def changed_lines(
    before: dict[str, list[str]], after: dict[str, list[str]]
) -> set[tuple[str, int]]:
    """(file, line) of every line of ``before`` an edit replaced or removed, and the line an
    insertion went in front of."""
    changed: set[tuple[str, int]] = set()
    for name in set(before) | set(after):
        old, new = before.get(name, []), after.get(name, [])
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(
            a=old, b=new, autojunk=False
        ).get_opcodes():
            if tag == "equal":
                continue
            changed.update((name, line) for line in range(i1 + 1, max(i2, i1 + 1) + 1))
    return changed


EDITED = re.compile(r"edited (\S+) at line (\d+)")


def finding_fixes(messages: list[dict[str, Any]], repair: bool) -> list[str]:
    """For each finding the episode showed (its repair prompt, each failing run_verify), whether
    the model's next edit changed a port line the finding cited: ``yes``, ``no``, ``rewrote``
    (a whole-file write_file) or ``no edit``."""
    outcomes: list[str] = []
    cited: set[tuple[str, int]] | None = None
    calls: dict[str, dict[str, Any]] = {}

    def settle(outcome: str) -> None:
        nonlocal cited
        if cited is not None:
            outcomes.append(outcome)
            cited = None

    for index, message in enumerate(messages):
        for part in message["parts"]:
            if part["type"] == "text" and index == 0 and message["role"] == "user":
                found = {(n, int(line)) for n, line in CITED.findall(part["text"])}
                cited = found if repair else None
            elif part["type"] == "tool_call":
                calls[part["id"]] = part
            elif part["type"] == "tool_result":
                call = calls.get(part["call_id"], {})
                content = str(part["content"])
                if part["name"] == "edit_file" and (m := EDITED.search(content)):
                    first = int(m.group(2))
                    span = str(call.get("arguments", {}).get("old", "")).count("\n")
                    lines = {(m.group(1), line) for line in range(first, first + span + 1)}
                    settle("yes" if cited and lines & cited else "no")
                elif part["name"] == "write_file" and not part["is_error"]:
                    settle("rewrote")
                elif part["name"] == "run_verify" and not content.startswith("verdict: equivalent"):
                    settle("no edit")
                    cited = {(n, int(line)) for n, line in CITED.findall(content)}
    settle("no edit")
    return outcomes


def episode_row(folder: Path, before: Path | None) -> dict[str, Any]:
    record = json.loads((folder / "cost.json").read_text())
    messages = _messages(folder)
    calls = [
        p
        for m in messages
        if m["role"] == "assistant"
        for p in m["parts"]
        if p["type"] == "tool_call"
    ]
    results = [
        p for m in messages if m["role"] == "user" for p in m["parts"] if p["type"] == "tool_result"
    ]
    verify_results = [r for r in results if r["name"] == "run_verify"]
    failing = [r for r in verify_results if not str(r["content"]).startswith("verdict: equivalent")]
    task = ""
    if messages and messages[0]["parts"]:
        task = str(messages[0]["parts"][-1].get("text", ""))
    shown = len(failing) + (1 if record["kind"] == "repair" else 0)
    named = "—"
    if record["kind"] == "repair" and before is not None:
        cited = {(name, int(line)) for name, line in CITED.findall(task)}
        changed = changed_lines(_port_files(before), _port_files(folder))
        hit = cited & changed
        if not changed:
            named = "no change"
        elif hit:
            named = "yes (" + ", ".join(f"{n}:{line}" for n, line in sorted(hit)[:3]) + ")"
        else:
            where = sorted(changed)
            named = f"no (cited {len(cited)} lines; changed {where[0][0]}:{where[0][1]}…)"
    u = record["usage"]
    return {
        "number": record["number"],
        "kind": record["kind"],
        "agent": record["agent_status"],
        "verdict": record["verdict"],
        "calls": record["calls"],
        "tokens": u["input"]
        + u["output"]
        + u["cache_read"]
        + u["cache_write"]
        + u["cache_write_1h"],
        "usage": u,
        "cost": Decimal(record["cost_usd"]),
        "verify_calls": sum(1 for c in calls if c["name"] == "run_verify"),
        "findings_shown": shown,
        "named": named,
        "fixes": finding_fixes(messages, record["kind"] == "repair"),
        "finding": record.get("finding", ""),
    }


def run_rows(workspace: Path) -> list[dict[str, Any]]:
    folders = sorted((workspace / "iterations").glob("[0-9][0-9]"))
    rows, before = [], None
    for folder in folders:
        rows.append(episode_row(folder, before))
        before = folder
    return rows


def markdown(rows: list[dict[str, Any]], name: str) -> str:
    total_cost = sum((r["cost"] for r in rows), Decimal(0))
    lines = [
        f"**{name}**: {len(rows)} episodes, {sum(r['calls'] for r in rows)} model calls, "
        f"{sum(r['tokens'] for r in rows):,} tokens, ${total_cost:.4f}, "
        f"{sum(r['verify_calls'] for r in rows)} run_verify calls, "
        f"{sum(r['findings_shown'] for r in rows)} findings shown",
        "",
        "| # | kind | agent | verdict | calls | tokens (in / cache read / cache write / out) | "
        "USD | run_verify | findings shown | next edit on a cited line | "
        "repair: the prompt cited a line the episode changed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        u = r["usage"]
        tokens = f"{u['input']:,} / {u['cache_read']:,} / {u['cache_write'] + u['cache_write_1h']:,} / {u['output']:,}"
        lines.append(
            f"| {r['number']} | {r['kind']} | {r['agent']} | {r['verdict']} | {r['calls']} | "
            f"{tokens} | {r['cost']:.4f} | {r['verify_calls']} | {r['findings_shown']} | {', '.join(r['fixes']) or '—'} | {r['named']} |"
        )
    return "\n".join(lines) + "\n"


def cassette_note(cassette: Path, workspace: Path, args: list[str], played: str) -> dict[str, Any]:
    """The note tests/agents/test_recorded_runs.py reads beside a committed cassette: the
    translate options it was recorded with and what the run came to (from its workspace)."""
    from envforge.agents.cassette import ReplayModel
    from envforge.agents.messages import Usage
    from envforge.cost.prices import load_price_table

    replay = ReplayModel(cassette)
    price = load_price_table().price_for(replay.name)
    usd = sum((price.cost(Usage(**r["usage"])) for _, r in replay.calls), Decimal(0))
    rows = run_rows(workspace)
    verified = bool(rows) and rows[-1]["verdict"] == "equivalent"
    return {
        "model": replay.name,
        "played": played,
        "args": args,
        "expect": {
            "status": "verified" if verified else "see the run's table",
            "episodes": [[r["kind"], r["agent"], r["verdict"]] for r in rows],
            "calls": len(replay.calls),
            "recorded_usd": str(usd),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--name", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--note-for", type=Path, help="write this cassette's .json note")
    parser.add_argument("--args", default="", help="the translate options it was recorded with")
    parser.add_argument("--played", default="", help="who played it, when")
    args = parser.parse_args(argv)
    if args.note_for is not None:
        note = cassette_note(args.note_for, args.workspace, args.args.split(), args.played)
        args.note_for.with_suffix(".json").write_text(json.dumps(note, indent=1) + "\n")
        print(json.dumps(note["expect"]))
        return 0
    rows = run_rows(args.workspace)
    if not rows:
        print(f"no iterations under {args.workspace}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, default=str, indent=1))
    else:
        print(markdown(rows, args.name or args.workspace.name), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
