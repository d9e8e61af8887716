"""Every port under generated/ declares how it was made (hand, agent, third-party)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.translate.made_by import MADE_BY, declared_made_by, front_matter, port_made_by

ROOT = Path(__file__).resolve().parents[2]
PORT_FOLDERS = sorted(p for p in (ROOT / "generated").glob("*/*") if p.is_dir())


def test_the_front_matter_is_read_back_and_nothing_else_counts() -> None:
    for made_by in MADE_BY:
        assert declared_made_by(front_matter(made_by) + "# Provenance: x\n") == made_by
    assert declared_made_by("# Provenance: x\n\nmade_by: hand\n") is None  # not front matter
    assert declared_made_by("---\ntitle: x\n---\nmade_by: hand\n") is None  # after it
    assert declared_made_by("---\nmade_by: robot\n---\n") is None  # unknown value
    assert declared_made_by('---\nmade_by: "hand"\n---\n') == "hand"
    with pytest.raises(ValueError, match="made_by"):
        front_matter("robot")


@pytest.mark.parametrize("port", PORT_FOLDERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_generated_port_declares_how_it_was_made(port: Path) -> None:
    made_by = port_made_by(port)
    assert made_by in MADE_BY, f"{port}/PROVENANCE.md: no `made_by:` front matter (see made_by.py)"
    text = " ".join((port / "PROVENANCE.md").read_text().split())  # line breaks as spaces
    if made_by == "hand":  # says so in words too
        assert "**not** produced by" in text


def test_list_shows_how_each_port_was_made() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "list", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["pong"]["made_by"] == {"jax": "hand", "rust": "hand"}
