"""Every way into envforge is in the inventory (``envforge/untrusted/entry_points.py``), and
goes through its door: the approach of ``test_one_door.py`` (an ``ast`` walk over the source
tree, and a small broken package it must catch) applied to the entry points themselves.

Found in the source: typer commands (``X.command("name")``, groups by ``add_typer(X,
name=...)``), MCP tools (functions decorated ``@server.tool(...)``), workspace scripts (each
``entry_script(NAME, ...)`` call: the one writer of a script), agent tools (the keys of
``self._handlers``), and the Python API (public functions of ``envforge/__init__.py``). Beside
them: no module writes a script (a ``#!`` text) but ``untrusted/scripts.py``, and no module
copies files with ``shutil`` (the one file rule, ``untrusted/regular.py``, copies).
"""

from __future__ import annotations

import ast
from pathlib import Path

from envforge.untrusted.entry_points import DOORS, ENTRY_POINTS, INPUTS, SURFACES, table

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "envforge"
NOT_FOUND_IN_SOURCE = {
    ("command", "envforge verify --workspace"),  # an option of verify, listed for its door
    ("workspace config", ".mcp.json"),  # written as data (write_mcp_configs), checked by
    ("workspace config", ".gemini/settings.json"),  # tests/sandbox/test_workspace_doors.py
    ("workspace config", ".codex/config.toml"),
}
"""Listed entry points no ``ast`` walk finds, and why."""
COPIERS = {"copy", "copy2", "copyfile", "copytree", "copyfileobj", "move"}
"""``shutil``'s copying functions: they follow links and open FIFOs."""
ONE_RULE = ("untrusted/",)


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
    return out


def _text(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def entry_points_in(package: Path) -> set[tuple[str, str]]:
    """(surface, name) of every entry point the source under ``package`` defines."""
    found: set[tuple[str, str]] = set()
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        constants = _constants(tree)
        groups = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_typer":
                name = next((_text(k.value, constants) for k in node.keywords if k.arg == "name"), None)  # fmt: skip
                if node.args and isinstance(node.args[0], ast.Name) and name:
                    groups[node.args[0].id] = name
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                first = _text(node.args[0], constants) if node.args else None
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == "command"
                    and isinstance(func.value, ast.Name)
                    and first
                ):
                    group = groups.get(func.value.id)
                    found.add(("command", " ".join(["envforge", *([group] if group else []), first])))  # fmt: skip
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name == "entry_script" and first:
                    found.add(("workspace script", first))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    if isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", None) == "tool":  # fmt: skip
                        found.add(("mcp tool", node.name))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(getattr(t, "attr", None) == "_handlers" for t in targets) and isinstance(
                    node.value, ast.Dict
                ):
                    for key in node.value.keys:
                        if key is not None and (tool := _text(key, constants)):
                            found.add(("agent tool", tool))
        if path == package / "__init__.py":
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                    found.add(("python api", f"envforge.{node.name}"))
    return found


def around_the_door(package: Path) -> list[str]:
    """Scripts written and files copied outside the one writer and the one file rule."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module.startswith(ONE_RULE):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{module}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.startswith("#!"):
                    problems.append(f"{where}: writes a script (untrusted/scripts.py writes them)")
            elif isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                if isinstance(head, ast.Constant) and str(head.value).startswith("#!"):
                    problems.append(f"{where}: writes a script (untrusted/scripts.py writes them)")
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in COPIERS
                and isinstance(node.value, ast.Name)
                and node.value.id == "shutil"
            ) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "shutil"
                and any(alias.name in COPIERS for alias in node.names)
            ):
                problems.append(f"{where}: copies with shutil (untrusted/regular.py copies)")
    return sorted(problems, key=lambda p: (p.split(":")[0], int(p.split(":")[1])))


def inventory_problems(package: Path) -> list[str]:
    listed = {(p.surface, p.name) for p in ENTRY_POINTS}
    found = entry_points_in(package)
    problems = [f"{s} {n!r}: not in the inventory" for s, n in sorted(found - listed)]
    stale = listed - found - NOT_FOUND_IN_SOURCE
    problems += [f"{s} {n!r}: listed, but not in the source" for s, n in sorted(stale)]
    return problems + around_the_door(package)


def test_every_entry_point_is_in_the_inventory_with_known_inputs_and_doors() -> None:
    assert inventory_problems(PACKAGE) == []
    assert len({(p.surface, p.name) for p in ENTRY_POINTS}) == len(ENTRY_POINTS)
    for point in ENTRY_POINTS:
        assert point.surface in SURFACES, point
        assert set(point.inputs) <= set(INPUTS) and set(point.doors) <= set(DOORS), point
        assert bool(point.inputs) == bool(point.doors), point  # an input needs a door
        assert len(set(point.doors)) == len(point.doors), point


def test_the_inventory_rule_catches_an_entry_point_beside_the_door(tmp_path: Path) -> None:
    package = tmp_path / "envforge"
    (package / "commands").mkdir(parents=True)
    (package / "mcp").mkdir()
    (package / "workspace").mkdir()
    (package / "__init__.py").write_text("def make(env):\n    return env\n")
    (package / "commands" / "quick.py").write_text(
        "import typer\nquick = typer.Typer()\n\n"
        "@quick.command('run')\ndef run() -> None: ...\n\n"
        "def register(app):\n    app.command('verify')(run)\n    app.add_typer(quick, name='quick')\n"
    )
    (package / "mcp" / "server.py").write_text(
        "def build(server):\n    @server.tool(description='x')\n    def peek() -> str: ...\n"
    )
    (package / "workspace" / "tools.py").write_text(
        "import shutil\nRUN = 'run'\n"
        "def write(root):\n"
        "    (root / 'run').write_text(f'#!/bin/sh\\ncd {root} && python -m envforge.cli')\n"
        "    shutil.copytree(root / 'reference', root / 'copy')\n"
        "    return entry_script(RUN, 'runs it', ['-m', 'envforge.cli'])\n"
    )
    problems = inventory_problems(package)
    assert problems[:3] == [
        "command 'envforge quick run': not in the inventory",
        "mcp tool 'peek': not in the inventory",
        "workspace script 'run': not in the inventory",
    ]
    assert "command 'envforge mutate': listed, but not in the source" in problems
    assert problems[-2:] == [
        "workspace/tools.py:4: writes a script (untrusted/scripts.py writes them)",
        "workspace/tools.py:5: copies with shutil (untrusted/regular.py copies)",
    ]


def test_docs_sandbox_lists_every_entry_point_as_the_inventory_says() -> None:
    doc = (ROOT / "docs" / "SANDBOX.md").read_text()
    assert table() in doc
