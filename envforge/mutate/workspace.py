"""Which implementation is mutated, and how one mutant is laid out on disk for the verifier.

A port mutant is a copy of the port directory with one file replaced; the verifier then runs
the unchanged reference against it. A reference mutant (``--side reference``, C or Python
references) is a copy of ``references/<env>/`` with one file replaced, verified against the
unchanged port: it asks whether the verifier would notice the reference changing instead.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from envforge.backends.jax import find_port_module
from envforge.backends.recipe import Recipe, port_recipe, reference_recipe
from envforge.errors import BadInput
from envforge.mutate.mutant import Mutant
from envforge.resolve import resolve_port
from envforge.rng.draws import is_rust_draws_copy
from envforge.spec import EnvSpec, load_spec
from envforge.targets import target_of_port
from envforge.untrusted.port_files import copy_port, list_port

BUILT = (".so", ".pyc")
"""Build output never copied into a mutant's folder (caches and ``target/`` are never listed)."""


@dataclass(frozen=True)
class Target:
    spec: EnvSpec
    side: str
    """port | reference"""
    root: Path
    """Directory that is copied for each mutant."""
    files: tuple[Path, ...]
    """Files that get mutated (inside ``root``)."""
    port: Path
    """The port the verifier compares (the original one for reference mutants)."""


def resolve_target(spec: EnvSpec, side: str, target: str, port: str | None) -> Target:
    port_path = resolve_port(spec, port, target).resolve()
    if side == "port":
        root = port_path if port_path.is_dir() else port_path.parent
        _regular_only(root)
        kind = target_of_port(port_path)
        if kind.python_module:
            files: tuple[Path, ...] = (find_port_module(port_path, spec.name),)
        else:
            # the verbatim draw interface (src/draws.rs) is envforge's, not the port's code
            globbed = sorted({p for g in kind.source_globs for p in root.glob(g)})
            files = tuple(p for p in globbed if not is_rust_draws_copy(p))
        return Target(spec, side, root, files, port_path)
    if side == "reference":
        path = spec.reference_path()
        if path is None:
            raise BadInput(f"{spec.reference} is not a file: only C and Python references mutate")
        _regular_only(spec.root)
        return Target(spec, side, spec.root, (path.resolve(),), port_path)
    raise BadInput(f"--side: expected port or reference, got {side!r}")


def _regular_only(root: Path) -> None:
    """Refuse a folder to mutate that holds links or special files: each mutant is a copy of
    it, made on the host, which would otherwise follow them (a port's link to a 0600 file)."""
    refused = list_port(root).refused
    if refused:
        raise BadInput(
            f"mutate: {root}: {'; '.join(r.line() for r in refused)}: envforge copies "
            "only regular files into a mutant; replace each with the file itself"
        )


def materialize(target: Target, mutant: Mutant, workdir: Path) -> tuple[EnvSpec, Path]:
    """Write the mutant under ``workdir``; returns the spec and the port path to verify."""
    dest = workdir / re.sub(r"[^\w.-]", "_", mutant.id)
    if dest.exists():
        shutil.rmtree(dest)
    files = list_port(target.root)  # the host's own listing: a mutant's copy follows no link
    copy_port(replace(files, names=tuple(n for n in files.names if not n.endswith(BUILT))), dest)
    (dest / mutant.file).write_text(mutant.source)
    if target.side == "reference":
        return load_spec(dest / "env.toml"), target.port
    if target.port.is_dir():
        return target.spec, dest
    return target.spec, dest / target.port.name


def recipes(
    target: Target, spec: EnvSpec, port: Path, strict_float: bool | None
) -> tuple[Recipe, Recipe]:
    """(original, mutant) recipes of the mutated side, for the differential comparison."""
    if target.side == "reference":
        return reference_recipe(target.spec, strict_float), reference_recipe(spec, strict_float)
    return port_recipe(target.spec, target.port, strict_float), port_recipe(
        spec, port, strict_float
    )
