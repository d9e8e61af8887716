"""What of a reference's folder an agent's workspace keeps (``envforge prompt``).

A reference's README.md holds two things: what an implementer needs (the environment, its
state, its quirks, where its data comes from) and the project's own notes (measured tolerances,
verification and mutation results, benchmarks, the shipped ports). The project's part starts at
a marker line, :data:`PROJECT_NOTES`; the workspace's copy ends before it.

No copy names a shipped port (an answer the agent must not be shown): env.toml loses its
``[port]`` table, and a README line above the marker that names a port path or ``generated/``
is dropped (the shipped READMEs have none there; tests/agents/test_agent_workspace_facts.py keeps it so).
"""

from __future__ import annotations

import re
from pathlib import Path

from envforge.spec import EnvSpec

PROJECT_NOTES = (
    "<!-- project notes: envforge prompt leaves the rest of this file out of agent workspaces -->"
)
"""The marker line in a reference's README.md: below it, what the project keeps for itself."""
NOTES_FILES = ("README.md",)
SHIPPED_PORTS = "generated/"
"""Where the project's own ports live; no workspace file names it."""
_TABLE = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_PORT_KEY = re.compile(r"^\s*port\s*[.=]")
"""``port = {jax = "..."}`` or ``port.jax = "..."`` before the first table."""


def implementer_notes(text: str, port_paths: list[str] | tuple[str, ...] = ()) -> str:
    """A README without the project's notes and without lines naming a shipped port."""
    kept: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith(PROJECT_NOTES[:20]):
            break
        if SHIPPED_PORTS in line or any(p and p in line for p in port_paths):
            continue
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + "\n"


def without_port_table(toml_text: str) -> str:
    """env.toml without its ``[port]`` table (the shipped ports' paths): the workspace's
    verifier names the port itself."""
    kept: list[str] = []
    inside, top_level = False, True
    for line in toml_text.splitlines():
        header = _TABLE.match(line)
        if header:
            inside, top_level = header.group(1).split(".")[0].strip() == "port", False
        if inside or (top_level and _PORT_KEY.match(line)):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def tidy_copy(spec: EnvSpec, copy: Path) -> None:
    """Make the workspace's ``reference/`` (a fresh copy of the spec's folder) the implementer's:
    README files cut at :data:`PROJECT_NOTES`, env.toml without ``[port]``."""
    ports = tuple(spec.port.values())
    for name in NOTES_FILES:
        path = copy / name
        if path.is_file():
            path.write_text(implementer_notes(path.read_text(errors="replace"), ports))
    toml = copy / "env.toml"
    if toml.is_file():
        toml.write_text(without_port_table(toml.read_text()))
