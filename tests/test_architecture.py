"""House rules that a reviewer would otherwise have to re-check by hand (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "envforge"


def private_imports(root: Path) -> list[str]:
    """``file: from module import _name`` for every envforge module importing another's
    private name (dunders such as ``__version__`` are public)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("envforge"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(root.parent)}: {node.module}.{alias.name}")
    return found


def test_no_module_imports_another_modules_private_names(tmp_path: Path) -> None:
    assert private_imports(PACKAGE) == []
    # the check itself sees one
    pkg = tmp_path / "envforge"
    pkg.mkdir()
    (pkg / "a.py").write_text("from envforge.b import _hidden, __version__, public\n")
    assert private_imports(pkg) == ["envforge/a.py: envforge.b._hidden"]
