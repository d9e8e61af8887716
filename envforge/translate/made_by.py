"""How a port was made, as the front matter of its PROVENANCE.md says.

Ports written by hand live in ``generated/<env>/<target>/`` beside ports an agent wrote through
``envforge translate``; the folder does not tell them apart, the first lines of PROVENANCE.md
do::

    ---
    made_by: hand
    ---
    # Provenance: ...

``hand``: written by a person or a coding-agent session working by hand (reading what it
likes), not from envforge's prompt; ``agent``: written by a coding agent from envforge's own
task, either ``envforge translate`` (or ``envforge batch``), which writes this front matter
itself, or an agent working only from an ``envforge prompt`` workspace (its PROVENANCE.md says
which); ``third-party``: someone else's port behind envforge's
port contract (Brax's HalfCheetah). ``tests/house/test_made_by.py`` checks that every PROVENANCE.md
under ``generated/`` declares one, and ``envforge list`` shows it beside each port.
"""

from __future__ import annotations

from pathlib import Path

MADE_BY = ("hand", "agent", "third-party")
PROVENANCE_FILE = "PROVENANCE.md"


def front_matter(made_by: str) -> str:
    """The lines that open a PROVENANCE.md of a port made ``made_by``."""
    if made_by not in MADE_BY:
        raise ValueError(f"made_by: expected one of {MADE_BY}, got {made_by!r}")
    return f"---\nmade_by: {made_by}\n---\n"


def declared_made_by(text: str) -> str | None:
    """The ``made_by`` of a PROVENANCE.md's text, or None when it declares none (or an unknown
    value): front matter between two ``---`` lines at the very top."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:]:
        if line.strip() == "---":
            return None
        key, sep, value = line.partition(":")
        if sep and key.strip() == "made_by":
            value = value.strip().strip("\"'")
            return value if value in MADE_BY else None
    return None


def port_made_by(port: Path) -> str | None:
    """``declared_made_by`` of the PROVENANCE.md in the port folder ``port`` (or beside the
    port file), None when there is none."""
    folder = port if port.is_dir() else port.parent
    path = folder / PROVENANCE_FILE
    if not path.is_file():
        return None
    return declared_made_by(path.read_text(errors="replace"))
