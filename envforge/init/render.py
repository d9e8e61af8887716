"""A draft as spec data and as a commented ``env.toml`` (+ README stub) for a person to review."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.init.draft import Draft
    from envforge.init.fields import FieldDraft


def events_seen(terminated: int, truncated: int) -> list[dict[str, str]]:
    events = []
    if terminated:
        events.append({"name": "terminated", "expr": "terminated"})
    if truncated:
        events.append({"name": "timeout", "expr": "truncated"})
    return events


def spec_table(draft: Draft, fields: list[FieldDraft]) -> dict[str, Any]:
    """The draft as the data ``EnvSpec`` validates (what the TOML text says, without comments)."""
    table: dict[str, Any] = {
        "name": draft.name,
        "reference": draft.reference,
        "description": f"drafted by envforge init from {draft.reference}",
        "episode_cap": draft.episode_cap,
        "observation": dict(draft.observation),
        "action": dict(draft.action),
        "state": [f.table() for f in fields],
        "rng": dict(draft.rng),
        "compare": dict(draft.compare),
        "event": list(draft.events),
        "policy": list(draft.policies),
    }
    if draft.termination is not None:
        table["termination"] = draft.termination
    if draft.options:
        table["options"] = dict(draft.options)
    if draft.c:
        table["c"] = dict(draft.c)
    if draft.agents:
        table["agents"] = dict(draft.agents)
    return table


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(type(v))


def _lines(table: dict[str, Any]) -> list[str]:
    return [f"{k} = {_value(v)}" for k, v in table.items()]


def observation_lines(table: dict[str, Any]) -> list[str]:
    """``[observation]``, or one ``[observation.parts.<name>]`` table per named part."""
    plain = {k: v for k, v in table.items() if k != "parts"}
    out = ["[observation]", *_lines(plain)] if plain or "parts" not in table else []
    for name, part in table.get("parts", {}).items():
        out += [f"[observation.parts.{_key(name)}]", *_lines(part)]
    return out


def _key(name: str) -> str:
    """A TOML key: bare when it can be, else quoted (a nested part's ``agent.pos``)."""
    return name if name.replace("_", "a").replace("-", "a").isalnum() else json.dumps(name)


def render_toml(draft: Draft) -> str:
    out = [
        f"# {draft.name}: drafted by `envforge init --ref {draft.reference}`. REVIEW EVERY LINE",
        "# marked GUESS or observed (see docs/SPEC.md, 'Reviewing a draft'), then delete this note.",
        f"# {draft.probed}",
        f"name = {_value(draft.name)}",
        f"reference = {_value(draft.reference)}",
        f"description = {_value(f'drafted by envforge init from {draft.reference}')}"
        "  # GUESS: say what the env is",
        f"episode_cap = {draft.episode_cap}  # {draft.episode_cap_note}",
    ]
    if draft.termination is not None:
        out.append(f"# termination: {draft.termination_note}")
        out.append(f"termination = {_value(draft.termination)}")
    else:
        out.append(f"# termination: {draft.termination_note or 'not drafted'}; add the")
        out.append("# predicate that reproduces `terminated` from after.<field> (docs/SPEC.md)")
    if draft.options:
        out += ["", "# passed to the reference's constructor", "[options]", *_lines(draft.options)]
    if draft.c:
        out += ["", f"# {draft.c_note}", "[c]", *_lines(draft.c)]
    if draft.agents:
        out += ["", f"# {draft.agents_note}", "[agents]", *_lines(draft.agents)]
    out += ["", f"# {draft.observation_note}", *observation_lines(draft.observation)]
    if draft.action_note:
        out.append("")
        out.append(f"# {draft.action_note}")
    else:
        out.append("")
    out += ["[action]", *_lines(draft.action)]
    out += ["", f"# {draft.rng_note}", "[rng]", *_lines(draft.rng)]
    out += ["", f"# GUESS: {draft.compare_note}", "[compare]", *_lines(draft.compare)]
    out += ["", f"# Canonical state: {draft.state_note} (docs/SPEC.md)."]
    for f in draft.fields:
        out.append("")
        out += [f"# {note}" for note in f.notes]
        out.append("[[state]]")
        out += _lines(f.table())
    if draft.left_out:
        out += [
            "",
            "# Left out of the canonical state (the self-check decides whether they matter):",
        ]
        out += [f"#   {name}: {why}" for name, why in draft.left_out]
    if draft.events:
        out += ["", "# Events seen in the probe; add the rare ones a port can get wrong."]
    for e in draft.events:
        out += ["[[event]]", *_lines(e)]
    if draft.policies:
        out += ["", "# GUESS: proposed by the model (--model), each ran on the reference"]
        for p in draft.policies:
            out += ["[[policy]]", *_lines(p)]
        out += ["", "# No [l4] drafted (docs/L4.md)."]
    else:
        out += [
            "",
            "# No [[policy]] drafted: L3 runs uniform and sticky random actions. Add a scripted",
            "# policy that reaches the rare events (docs/SPEC.md). No [l4] drafted (docs/L4.md).",
        ]
    if draft.check is not None:
        out += ["", f"# {draft.check.summary()}"]
    return "\n".join(out) + "\n"


def render_readme(draft: Draft) -> str:
    fields = ", ".join(f.name for f in draft.fields)
    check = draft.check.summary() if draft.check is not None else "self-check not run"
    return (
        f"# {draft.name}\n\n"
        f"Reference: `{draft.reference}`. Spec drafted by `envforge init` from the reference "
        f"itself; review `env.toml` before relying on it (every guess is marked there).\n\n"
        f"- canonical state: {fields}\n"
        f"- {check}\n\n"
        "TODO: say what the environment is, where its reference comes from, and which of the "
        "drafted ranges, events and policies a person has checked.\n"
    )
