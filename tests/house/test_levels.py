"""The levels are declared once (``envforge/verify/levels.py``); the runner, the
``--levels`` option, reports, the agent workspace and the docs' level tables all read it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from envforge.errors import BadInput
from envforge.verify.levels import LEVELS, LEVELS_HELP, level, parse_levels
from envforge.verify.verdict import LevelResult

ROOT = Path(__file__).resolve().parents[2]


def test_each_level_names_a_module_that_runs_it() -> None:
    assert [lv.number for lv in LEVELS] == list(range(len(LEVELS)))
    for lv in LEVELS:
        module = importlib.import_module(lv.module)
        assert callable(module.run), lv.module
        assert lv.module.rsplit(".", 1)[1] == f"level{lv.number}_{lv.name}"


@pytest.mark.parametrize("doc", ["README.md", "docs/DESIGN.md", "docs/LEVELS.md"])
def test_the_docs_level_tables_say_what_the_table_says(doc: str) -> None:
    rows = re.findall(r"^\| (L\d \w+) \| ([^|]+?) \|", (ROOT / doc).read_text(), re.M)
    assert rows == [(lv.title, lv.question) for lv in LEVELS], doc


def test_levels_are_parsed_and_named_from_the_table() -> None:
    assert parse_levels("0-3") == [0, 1, 2, 3] and parse_levels("1,3") == [1, 3]
    with pytest.raises(BadInput, match=r"levels are 0\.\.4"):
        parse_levels("5")
    assert all(f"{lv.number} {lv.name}" in LEVELS_HELP for lv in LEVELS)
    assert LevelResult(level=2, status="pass").name == level(2).name == "interactions"


def test_the_agent_workspace_lists_the_levels(tmp_path: Path) -> None:
    from envforge.spec import spec_for_name
    from envforge.workspace.write import write_workspace

    root = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    task = (root / "AGENTS.md").read_text()
    for lv in LEVELS:
        assert f"- {lv.number} {lv.name}: {lv.question}" in task


def test_no_level_imports_another_levels_module() -> None:
    """What two levels share lives in a helper with a plain name (``reachable.py``,
    ``episodes.py``, ``search.py``), never in one level's module imported by another."""
    verify = ROOT / "envforge" / "verify"
    crossing = []
    for module in sorted(verify.glob("level[0-9]*.py")):
        own = re.match(r"level(\d)", module.name)
        assert own is not None
        for other in re.findall(r"envforge\.verify\.level(\d)\w*", module.read_text()):
            if other != own.group(1):
                crossing.append(f"{module.name} imports level {other}")
    assert not crossing, crossing


def test_the_mcp_verify_tool_names_the_levels() -> None:
    from envforge.mcp.server import LEVELS_LINE

    assert all(f"{lv.number} {lv.name} ({lv.question})" in LEVELS_LINE for lv in LEVELS)


def test_the_built_in_agents_prompt_and_tool_describe_l0_as_the_table_does() -> None:
    """The system prompt and the run_verify tool of `envforge translate`'s own agent said
    "does it load" and "load and API contract" in their own words."""
    from envforge.prompts.render import render
    from envforge.prompts.tools import tool_specs

    question = LEVELS[0].question.rstrip("?")
    assert f'"0" ({question})' in render("system.j2", max_level=3)
    (verify_tool,) = [t for t in tool_specs("0-3") if t.name == "run_verify"]
    assert f"'0' ({question})" in verify_tool.parameters["properties"]["levels"]["description"]
