"""``--port P`` of ``envforge bench`` and ``envforge profile``: a candidate port folder (or
module), checked on the host without importing or building it: it exists, it is a port of the
target asked for, and (JAX) its module can be found. Bad input is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

from envforge.backends.jax import find_port_module
from envforge.backends.recipe import port_kind
from envforge.errors import BadInput
from envforge.spec import EnvSpec
from envforge.targets import get_target


def candidate_port(spec: EnvSpec, port: str, targets: list[str] | None) -> tuple[str, Path]:
    """(target, path) of the candidate ``port``; ``targets`` is ``--target`` (at most one)."""
    if targets and len(targets) > 1:
        raise BadInput(f"--port: give at most one --target with a candidate port, got {targets}")
    wanted = targets[0] if targets else None
    if wanted is not None:
        get_target(wanted)  # one line naming the targets there are
    path = Path(port).expanduser()
    if not path.exists():
        raise BadInput(f"--port: {port}: no such file or folder")
    path = path.resolve()
    try:
        kind = port_kind(path)
    except BadInput as e:
        raise BadInput(f"--port: {e}") from None
    if wanted is not None and kind != wanted:
        raise BadInput(f"--port: {port} is a {kind} port, not a {wanted} port")
    if get_target(kind).python_module:
        try:
            find_port_module(path, spec.name)
        except BadInput as e:
            raise BadInput(f"--port: {e}") from None
    return kind, path
