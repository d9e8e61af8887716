"""Targets: the port languages envforge verifies, benchmarks and writes (see ``registry.py``)."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

from envforge.errors import BadInput
from envforge.targets import c, jax, rust
from envforge.targets.registry import Target, load_ref

BUILTIN: tuple[Target, ...] = (jax.TARGET, rust.TARGET, c.TARGET)
"""Every target, in the order commands list them (the first is the default)."""

__all__ = [
    "BUILTIN",
    "Target",
    "all_targets",
    "code_language",
    "default_target",
    "find_port_folders",
    "get_target",
    "load_ref",
    "recognised",
    "target_help",
    "target_names",
    "target_of_port",
]


def all_targets() -> tuple[Target, ...]:
    return BUILTIN


def target_names() -> tuple[str, ...]:
    return tuple(t.name for t in BUILTIN)


def default_target() -> str:
    return BUILTIN[0].name


def target_help(what: str = "Port language") -> str:
    """The ``--target`` option's help, from the registry."""
    return f"{what}: {' or '.join(target_names())}."


def get_target(name: str, option: str = "--target") -> Target:
    for target in BUILTIN:
        if target.name == name:
            return target
    choices = ", ".join(target_names())
    raise BadInput(f"unsupported target {name!r} ({option}): choose one of {choices}")


def target_of_port(port: Path) -> Target:
    """The target whose port ``port`` is (a Rust crate is tried before a Python folder, so a
    crate with a build script in Python is still a crate)."""
    for target in sorted(BUILTIN, key=lambda t: t.python_module):
        if target.recognise(port):
            return target
    expected = " or ".join(f"a {t.title} port" for t in BUILTIN)
    raise BadInput(f"cannot tell the port's target from {port} (expected {expected})")


def find_port_folders(
    env: str, roots: list[Path], declared: dict[str, str]
) -> list[tuple[str, Path]]:
    """``(label, path)`` of every port of ``env``: the spec's ``[port]`` entries, then each
    folder of ``generated/<env>/`` (under the first root that has it) that a target
    recognises, labelled by its folder name (``generated/halfcheetah/brax`` is ``brax``, a JAX
    port)."""
    found: dict[str, Path] = {}
    for label, rel in declared.items():
        for root in roots:
            if (root / rel).exists():
                found.setdefault(label, root / rel)
                break
    for root in roots:
        folder = root / "generated" / env
        if not folder.is_dir():
            continue
        for sub in sorted(folder.iterdir()):
            if sub.is_dir() and sub.name not in found and recognised(sub):
                found[sub.name] = sub
        break
    order = {name: i for i, name in enumerate(target_names())}
    return sorted(found.items(), key=lambda item: (order.get(item[0], len(order)), item[0]))


def code_language(source: Path | None) -> str:
    """The fence language of one port source file (a Python module's when no target's
    ``source_globs`` match it)."""
    for target in BUILTIN:
        if source is not None and any(
            fnmatch(source.name, g.rsplit("/", 1)[-1]) for g in target.source_globs
        ):
            return target.code_lang
    return "python"


def recognised(path: Path) -> bool:
    return any(t.recognise(path) for t in BUILTIN)
