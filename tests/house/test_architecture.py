"""House rules that a reviewer would otherwise have to re-check by hand (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "envforge"


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


def _package(module: str) -> str:
    """``envforge.verify.tape`` -> ``verify``; a top-level module is its own package
    (``envforge.spec`` -> ``spec``); ``envforge`` itself is ``envforge``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def package_imports(root: Path) -> dict[tuple[str, str], list[str]]:
    """``(package, package it imports) -> ["file:line", ...]`` over every import in the
    source, function-local (lazy) and ``TYPE_CHECKING`` ones included: a lazy import still
    makes the importer depend on the imported package, it only moves the cost."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module, is_package = _module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, *([node.module] if node.module else [])])
                targets = [base]
                if base == root.name:  # ``from envforge import spec``: a module, or a name
                    targets = [
                        f"{base}.{alias.name}"
                        if (root / f"{alias.name}.py").exists() or (root / alias.name).is_dir()
                        else base
                        for alias in node.names
                    ]
            for target in targets:
                if target != root.name and not target.startswith(root.name + "."):
                    continue
                source, imported = _package(module), _package(target)
                if source != imported:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    edges.setdefault((source, imported), []).append(where)
    return edges


def package_cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Groups of packages that import each other, directly or around a longer loop."""
    graph: dict[str, set[str]] = {}
    for source, imported in edges:
        graph.setdefault(source, set()).add(imported)
        graph.setdefault(imported, set())

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    reach = {package: reachable(package) for package in graph}
    groups = {
        tuple(sorted(p for p in graph if p in reach[package] and package in reach[p]))
        for package in graph
        if package in reach[package]
    }
    return sorted(list(group) for group in groups)


def test_no_import_cycle_between_packages(tmp_path: Path) -> None:
    edges = package_imports(PACKAGE)
    cycles = package_cycles(edges)
    # on failure, say which imports close each loop
    assert cycles == [], {
        f"{a} -> {b}": edges[(a, b)]
        for group in cycles
        for a in group
        for b in group
        if (a, b) in edges
    }
    # the check itself sees a loop of three, through a lazy and a relative import
    pkg = tmp_path / "envforge"
    for name in ("a", "b", "c"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from envforge.b.y import f\n")
    (pkg / "b" / "y.py").write_text("def f():\n    from ..c import z\n")
    (pkg / "c" / "z.py").write_text("from envforge import a\n")
    (pkg / "d.py").write_text("from envforge import __version__\n")
    assert package_cycles(package_imports(pkg)) == [["a", "b", "c"]]


MAX_MODULE_LINES = 400
"""docs/STYLE.md: a module is one idea, under ~400 lines; one that grows past it is holding two."""


def long_modules(root: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    counts = {
        str(path.relative_to(root.parent)): len(path.read_text().splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    return {name: n for name, n in counts.items() if n > limit}


def test_no_module_over_the_size_limit(tmp_path: Path) -> None:
    assert long_modules(PACKAGE) == {}
    # the check itself sees one
    pkg = tmp_path / "envforge"
    pkg.mkdir()
    (pkg / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (pkg / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert long_modules(pkg) == {"envforge/long.py": MAX_MODULE_LINES + 1}


OUTSIDE_NOTES = "../" + "shared"  # split so this file does not name the folder it forbids
TEXT_SUFFIXES = {".md", ".py", ".toml", ".j2", ".txt", ".rs", ".c", ".h", ".js", ".cfg"}
SKIPPED = {"target", "node_modules", "__pycache__", "envforge.egg-info"}


def outside_references(root: Path) -> list[str]:
    """Text files under ``root`` that point at notes outside the repository (a clone lacks them)."""
    hits = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in SKIPPED)
        for name in sorted(files):
            path = Path(folder) / name
            if path.suffix not in TEXT_SUFFIXES:
                continue
            lines = path.read_text(errors="replace").splitlines()
            where = path.relative_to(root)
            hits += [f"{where}:{n}" for n, line in enumerate(lines, 1) if OUTSIDE_NOTES in line]
    return hits


def test_the_repo_stands_alone(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(f"the contract is in `{OUTSIDE_NOTES}/DESIGN.md`\n")
    assert outside_references(tmp_path) == ["README.md:1"]
    assert outside_references(PACKAGE.parent) == []


GENERATED = PACKAGE.parent / "generated"
KIT = "envforge.kit"


def envforge_imports_outside_the_kit(root: Path) -> list[str]:
    """``port file:line: module`` for every import of envforge other than the port kit
    (``envforge.kit``, docs/PORT_KIT.md) in the ports under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if any(part in SKIPPED or part.startswith(".") for part in path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                base = node.module or ""
                modules = [f"{base}.{a.name}" if base == "envforge" else base for a in node.names]
            else:
                continue
            for module in modules:
                outside = module.split(".")[0] == "envforge" and not (
                    module == KIT or module.startswith(KIT + ".")
                )
                if outside:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {module}")
    return found


def test_generated_ports_import_only_the_port_kit(tmp_path: Path) -> None:
    outside = envforge_imports_outside_the_kit(GENERATED)
    assert outside == [], (
        f"{outside}: a port takes from envforge only what the kit offers, e.g. "
        "`from envforge.kit import Draws, speed_layer` (docs/PORT_KIT.md)"
    )
    # the check itself sees each way of reaching past the kit, and lets the kit through
    port = tmp_path / "pong" / "jax"
    port.mkdir(parents=True)
    (port / "pong.py").write_text(
        "import numpy as np\n"
        "from envforge import spec\n"
        "from envforge.rng.jax_draws import Draws\n"
        "import envforge.verify.stats\n"
        "from envforge.kit import Draws as D, speed_layer as s\n"
        "from envforge import kit\n"
        "import envforge.kit.contract\n"
    )
    assert envforge_imports_outside_the_kit(tmp_path) == [
        "pong/jax/pong.py:2: envforge.spec",
        "pong/jax/pong.py:3: envforge.rng.jax_draws",
        "pong/jax/pong.py:4: envforge.verify.stats",
    ]


TARGET_TESTS_ALLOWED = {
    # source languages of files (mutation operators), not port targets
    "envforge/mutate/generate.py": "language == 'rust'|language == 'c'",
    # a reference's kind: "c" names a C reference as well as the C target
    "envforge/backends/recipe.py": "kind in ('c', 'node')|recipe.kind == 'c'",
    "envforge/backends/reference_check.py": "kind == 'c'",
    "envforge/bench/suite.py": "spec.reference_kind == 'c'",
    "envforge/translate/preflight.py": "kind == 'c'",
    "envforge/prompts/sources.py": "kind == 'c'",
    "envforge/spec/load.py": "kind == 'c'",
    "envforge/verify/context.py": "reference_kind == 'c'",
}
"""``module: comparison|comparison`` tests of a target's name that may stay outside the registry."""


def target_name_tests(root: Path, names: set[str]) -> list[str]:
    """``module: comparison`` for every comparison with a target's name (``kind == "rust"``,
    ``target in ("jax", "rust")``) outside ``envforge/targets/``, the one place that says
    what a target is (adding a target must not mean finding such tests)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith(f"{root.name}/targets/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            values = []
            for side in (node.left, *node.comparators):
                parts = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                values += [p.value for p in parts if isinstance(p, ast.Constant)]
            if any(isinstance(v, str) and v in names for v in values):
                found.append(f"{rel}: {ast.unparse(node)}")
    return found


def test_no_target_name_tests_outside_the_registry(tmp_path: Path) -> None:
    from envforge.targets import target_names

    allowed = {f"{m}: {c}" for m, cs in TARGET_TESTS_ALLOWED.items() for c in cs.split("|")}
    found = target_name_tests(PACKAGE, set(target_names()))
    assert [f for f in found if f not in allowed] == []
    # the check itself sees each form, and not the registry's own
    pkg = tmp_path / "envforge"
    (pkg / "targets").mkdir(parents=True)
    (pkg / "targets" / "jax.py").write_text("ok = name == 'jax'\n")
    (pkg / "a.py").write_text("x = kind == 'rust'\ny = t in ('jax', 'other')\nz = k == 'node'\n")
    assert target_name_tests(pkg, {"jax", "rust"}) == [
        "envforge/a.py: kind == 'rust'",
        "envforge/a.py: t in ('jax', 'other')",
    ]


LAYERS: tuple[tuple[str, str], ...] = (
    ("neutral", "errors cache untrusted"),
    ("port kit", "rng kit targets"),
    ("spec", "spec"),
    ("drivers", "coverage native backends train resolve"),
    ("envforge.make", "envs envforge"),
    ("sandbox", "sandbox"),
    ("verifier", "verify"),
    ("over the verifier", "bench mutate prompts cost agents rules"),
    ("workflows", "translate init batch workspace mcp"),
    ("commands", "commands cli"),
)
"""The packages (and top-level modules) from the bottom layer up: a package imports only from
its own layer and those below (docs/ARCHITECTURE.md, "The layers")."""


def layer_violations(
    edges: dict[tuple[str, str], list[str]], layers: tuple[tuple[str, str], ...]
) -> list[str]:
    """Each import that goes up a layer, and each package no layer names."""
    rank = {package: i for i, (_, members) in enumerate(layers) for package in members.split()}
    names = [name for name, _ in layers]
    found = sorted({p for edge in edges for p in edge} - set(rank))
    problems = [f"{p}: in no layer (add it to LAYERS)" for p in found]
    for (source, imported), where in sorted(edges.items()):
        if source in rank and imported in rank and rank[imported] > rank[source]:
            problems.append(
                f"{source} ({names[rank[source]]}) imports {imported} "
                f"({names[rank[imported]]}, a layer up) at {', '.join(where)}"
            )
    return problems


def test_imports_never_go_up_a_layer(tmp_path: Path) -> None:
    assert layer_violations(package_imports(PACKAGE), LAYERS) == []
    # the check itself: a neutral module importing a command, and a package in no layer
    pkg = tmp_path / "envforge"
    (pkg / "commands").mkdir(parents=True)
    (pkg / "commands" / "__init__.py").write_text("")
    (pkg / "commands" / "run.py").write_text("from envforge.errors import E\n")
    (pkg / "errors.py").write_text("from envforge.commands.run import main\n")
    (pkg / "extra.py").write_text("from envforge import errors\n")
    assert layer_violations(package_imports(pkg), LAYERS) == [
        "extra: in no layer (add it to LAYERS)",
        "errors (neutral) imports commands (commands, a layer up) at envforge/errors.py:1",
    ]


TOP_LEVEL_MODULES = {"__init__", "cli", "errors", "cache", "resolve"}
"""What may live at the top of ``envforge/`` beside its packages: the CLI's entry, the error
types, the cache root and the resolver every command and ``envforge.make`` share. Anything else
belongs in the package where it is used (docs/ARCHITECTURE.md, "The rooms")."""


def loose_modules(root: Path, allowed: set[str]) -> list[str]:
    """Top-level modules of ``root`` that are not in ``allowed``."""
    return sorted(p.name for p in root.glob("*.py") if p.stem not in allowed)


def test_the_top_level_holds_only_what_is_shared(tmp_path: Path) -> None:
    assert len(TOP_LEVEL_MODULES) <= 6
    assert loose_modules(PACKAGE, TOP_LEVEL_MODULES) == []
    # the check itself sees a new loose module, and not a package
    pkg = tmp_path / "envforge"
    (pkg / "spec").mkdir(parents=True)
    (pkg / "spec" / "load.py").write_text("")
    (pkg / "cli.py").write_text("")
    (pkg / "helpers.py").write_text("")
    assert loose_modules(pkg, TOP_LEVEL_MODULES) == ["helpers.py"]


SPEC_MUST_NOT_IMPORT = ("targets", "backends", "verify", "sandbox", "native")
"""The spec is data: it describes an env and never reaches for the code that runs one."""


def test_the_spec_imports_no_code_that_runs_an_env(tmp_path: Path) -> None:
    def reached(root: Path) -> list[str]:
        return sorted(
            f"spec -> {imported} at {', '.join(where)}"
            for (source, imported), where in package_imports(root).items()
            if source == "spec" and imported in SPEC_MUST_NOT_IMPORT
        )

    assert reached(PACKAGE) == []
    # the check itself sees a lazy import of the target registry
    pkg = tmp_path / "envforge"
    (pkg / "spec").mkdir(parents=True)
    (pkg / "spec" / "__init__.py").write_text("")
    (pkg / "spec" / "lookup.py").write_text("def f():\n    from envforge.targets import get\n")
    assert reached(pkg) == ["spec -> targets at envforge/spec/lookup.py:2"]
