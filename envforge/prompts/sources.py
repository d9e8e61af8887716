"""The reference source a translation prompt shows: C files, a Python file, a gymnasium class."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.backends.library_files import environment_paths, find_library_module
from envforge.errors import BadInput
from envforge.spec import EnvSpec
from envforge.untrusted.regular import NotPlainFile, read_file

LANGUAGES = {
    ".c": "c", ".h": "c", ".py": "python", ".js": "javascript", ".rs": "rust", ".asm": "asm",
}  # fmt: skip
SOURCE_BYTES = 4 * 2**20
"""Largest reference or library source read to show (they are tens of kilobytes)."""
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


@dataclass(frozen=True)
class SourceFile:
    name: str
    """How the prompt labels it: a path relative to the project, or a module and class."""
    text: str
    language: str
    path: Path | None = None
    """On disk, when it is a file the agent may get a copy of."""
    library: str | None = None
    """For installed library code (env.toml ``library_modules``): where a workspace copies it,
    relative to its ``reference/`` folder (``library/rlcard/games/uno/round.py``)."""


def _label(path: Path, spec: EnvSpec) -> str:
    project = spec.root.parent.parent
    try:
        return str(path.resolve().relative_to(project.resolve()))
    except ValueError:
        return path.name


def _file(path: Path, spec: EnvSpec) -> SourceFile:
    try:  # the user's file, which may be a link; but a regular file, and not endless
        text = read_file(path.resolve(), SOURCE_BYTES, one_link=False).decode()
    except (NotPlainFile, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read reference source {path}: {e}") from None
    return SourceFile(_label(path, spec), text, LANGUAGES.get(path.suffix, ""), path)


def _c_sources(main: Path, spec: EnvSpec) -> list[SourceFile]:
    """The C file, the extra sources the spec lists and the local headers they include."""
    paths = [main] + [spec.root / s for s in (spec.c.sources if spec.c else ())]
    seen: list[Path] = []
    while paths:
        path = paths.pop(0)
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        for header in LOCAL_INCLUDE.findall(path.read_text(errors="replace")):
            paths.append(path.parent / header)
    return [_file(p, spec) for p in seen]


def _gymnasium_source(env_id: str) -> SourceFile:
    import gymnasium

    from envforge.backends.gym_ids import check_id

    check_id(env_id)  # imports the module of a "module:id"
    env_id = env_id.rsplit(":", 1)[-1]
    try:
        entry = gymnasium.spec(env_id).entry_point
    except gymnasium.error.Error as e:
        raise BadInput(f"gymnasium does not know {env_id!r}: {e}") from None
    obj: Any
    if not isinstance(entry, str):
        obj = entry
        label = getattr(entry, "__qualname__", env_id)
    else:
        module_name, _, attr = entry.partition(":")
        obj = getattr(importlib.import_module(module_name), attr)
        label = f"{module_name.replace('.', '/')}.py, class {attr}"
    source = without_drawing(inspect.getsource(obj))
    module = inspect.getmodule(obj)
    helpers = module_helpers(inspect.getsource(module), source) if module is not None else ""
    return SourceFile(f"gymnasium {gymnasium.__version__}: {label}", helpers + source, "python")


def _pettingzoo_source(module_name: str) -> SourceFile:
    """A PettingZoo reference's game: the ``raw_env`` class its module's ``env()`` wraps (the
    wrappers only check and convert), without drawing code, with the helpers it calls."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInput(f"pettingzoo:{module_name}: cannot import it: {e}") from None
    game = getattr(module, "raw_env", None)
    if not inspect.isclass(game):
        raise BadInput(f"pettingzoo:{module_name} has no raw_env class to show the agent")
    source = without_drawing(inspect.getsource(game))
    home = inspect.getmodule(game)
    helpers = module_helpers(inspect.getsource(home), source) if home is not None else ""
    label = f"{game.__module__.replace('.', '/')}.py, class {game.__name__}"
    return SourceFile(f"pettingzoo: {label}", helpers + source, "python")


def module_helpers(module_source: str, class_source: str) -> str:
    """The module-level functions and constants a class calls (Blackjack's ``draw_card``,
    ``sum_hand``, ``deck``), and those they call in turn, in the module's order: the class
    alone does not say what they do."""
    tree = ast.parse(module_source)
    defined: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defined[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defined[target.id] = node
    wanted: set[str] = set()
    todo = [class_source]
    while todo:
        used = {
            n.id
            for n in ast.walk(ast.parse(textwrap.dedent(todo.pop())))
            if isinstance(n, ast.Name)
        }
        for name in sorted(used & defined.keys() - wanted):
            wanted.add(name)
            todo.append(ast.get_source_segment(module_source, defined[name]) or "")
    picked = [node for node in tree.body if any(defined.get(n) is node for n in wanted)]
    if not picked:
        return ""
    parts = [ast.get_source_segment(module_source, node) or "" for node in picked]
    return "# module-level helpers the class uses\n" + "\n\n".join(parts) + "\n\n\n"


DRAWING_METHODS = ("render", "close")
DYNAMICS_METHODS = ("__init__", "reset", "step")
"""Never left out, even where they mention pygame (FrozenLake's ``__init__`` builds the
transition table beside its window settings)."""


def without_drawing(class_source: str) -> str:
    """A gymnasium class without its drawing code: ``render``/``close``, ``_render*`` and any
    other method that uses pygame. They never touch the dynamics and were a third of CartPole's
    source."""
    tree = ast.parse(textwrap.dedent(class_source))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)
    if cls is None:
        return class_source
    lines = class_source.splitlines()
    cut: list[tuple[int, int, str]] = []
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        body = "\n".join(lines[first - 1 : node.end_lineno])
        if node.name in DYNAMICS_METHODS:
            continue
        if node.name in DRAWING_METHODS or node.name.startswith("_render") or "pygame" in body:
            cut.append((first, node.end_lineno or node.lineno, node.name))
    for first, last, name in reversed(cut):
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        note = f"{indent}# {name}(): drawing only, left out (it does not change the state)"
        lines[first - 1 : last] = [note]
    return "\n".join(lines) + "\n"


def reference_sources(spec: EnvSpec) -> list[SourceFile]:
    kind = spec.reference_kind
    if kind == "gymnasium":
        return [_gymnasium_source(spec.reference.split(":", 1)[1])]
    if kind == "pettingzoo":
        return [_pettingzoo_source(spec.reference.split(":", 1)[1])]
    path = spec.reference_path()
    if path is None or not path.is_file():
        raise BadInput(f"reference source not found: {path or spec.reference}")
    main = _c_sources(path, spec) if kind == "c" else [_file(path, spec)]
    shown = {s.path.resolve() for s in main if s.path is not None}
    extra = [spec.root / name for name in spec.sources]
    for extra_path in extra:
        if not extra_path.is_file():
            raise BadInput(f"env.toml sources: {extra_path} is not a file")
    files = main + [_file(p, spec) for p in extra if p.resolve() not in shown]
    return files + [library_source(name) for name in spec.library_modules]


LIBRARY_DIR = "library"
"""Where a workspace's ``reference/`` folder holds its copies of ``library_modules``."""


def library_source(module: str) -> SourceFile:
    """An installed module's source, labelled with its distribution and version: found in the
    reference's environment without importing anything, read by the one rule."""
    found = find_library_module(module, environment_paths())
    if found is None:
        raise BadInput(f"env.toml library_modules: {module} is not an installed Python module")
    entry, origin = found
    relative = origin.relative_to(entry.resolve())
    top = module.split(".")[0]
    dists = importlib.metadata.packages_distributions().get(top, [])
    made = f"{dists[0]} {importlib.metadata.version(dists[0])}" if dists else top
    try:
        text = read_file(origin, SOURCE_BYTES, one_link=False).decode(errors="replace")
    except NotPlainFile as e:
        raise BadInput(f"env.toml library_modules: {module}: {e}") from None
    return SourceFile(
        f"{made}: {relative}", text, "python", origin, library=f"{LIBRARY_DIR}/{relative}"
    )
