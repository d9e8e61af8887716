"""The agent's tools as the prompts describe them (``tools.toml.j2``): name, what each does, and
its parameters' JSON schema, with the job's levels and limits filled in."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from envforge.prompts.render import render
from envforge.untrusted.input_files import parse_toml


class ToolText(NamedTuple):
    """One tool as the prompts describe it: its name, what it does, its parameters' schema."""

    name: str
    description: str
    parameters: dict[str, Any]


def tool_specs(
    levels: str = "0-3",
    wall_s: float = 120,
    output_chars: int = 12000,
    read_chars: int = 100_000,
    list_limit: int = 500,
) -> tuple[ToolText, ...]:
    """The agent's tools as rendered from ``tools.toml.j2`` (the agent wraps each in its own
    ``ToolSpec``)."""
    text = render(
        "tools.toml.j2",
        levels=levels,
        wall_s=int(wall_s),
        output_chars=output_chars,
        read_chars=read_chars,
        list_limit=list_limit,
    )
    return tuple(
        ToolText(t["name"], t["description"], json.loads(t["parameters"]))
        for t in parse_toml(text)["tool"]
    )
