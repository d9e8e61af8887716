"""What a command works on, resolved in one place: an env name, ``--ref`` and ``--spec`` give
the spec; ``--port`` and ``--target`` give the port. Every command (verify, bench, profile,
mutate, prompt, mcp, translate, train, rules) and ``envforge.make`` ask here, so they agree on
what each option means and say the same one line when something is missing (exit 2).

(``envforge/spec/lookup.py`` below it finds specs on disk; this module finds shipped ports and
decides which of the user's options win.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envforge.backends.jax import find_port_module
from envforge.errors import BadInput, PortNotFound
from envforge.spec import EnvSpec, load_spec, project_roots, spec_for_name, spec_for_reference
from envforge.targets import get_target, target_of_port

SpecFromRef = Callable[[str, "str | None"], EnvSpec]
"""How ``--ref`` (with ``--spec``, or None) becomes a spec: looked up, or drafted first."""


@dataclass(frozen=True)
class Resolved:
    """What to verify: the spec (its reference included), the port, and the port's target."""

    spec: EnvSpec
    port: Path
    target: str


def resolve_spec(
    env: str | None,
    ref: str | None = None,
    spec: str | Path | None = None,
    *,
    command: str = "verify",
    from_ref: SpecFromRef = spec_for_reference,
) -> EnvSpec:
    """The spec of ``--ref`` (with ``--spec`` when given), else ``--spec``, else the env's
    ``references/<env>/env.toml``. An env name beside them must be the spec's own env."""
    if ref is not None:
        env_spec = from_ref(ref, None if spec is None else str(spec))
    elif spec is not None:
        env_spec = load_spec(spec)
    elif env is not None:
        env_spec = spec_for_name(env)
    else:
        raise BadInput(f"name an env (envforge {command} pong) or pass --ref or --spec")
    if env is not None and env != env_spec.name:
        raise BadInput(f"env {env!r} is not the env of the spec in use ({env_spec.name!r})")
    return env_spec


def existing_port(port: str | Path) -> Path:
    """``--port`` as the user typed it, which must exist (:class:`PortNotFound` otherwise)."""
    path = Path(port).expanduser()
    if not path.exists():
        raise PortNotFound(port)
    return path


def resolve_port(spec: EnvSpec, port: str | Path | None, target: str) -> Path:
    """``--port`` when given, else the spec's shipped ``target`` port (``[port]`` or
    ``generated/<env>/<target>``)."""
    return existing_port(port) if port else default_port(spec, target)


def resolve(
    env: str | None,
    ref: str | None,
    spec: str | Path | None,
    port: str | Path | None,
    target: str,
    *,
    command: str = "verify",
    from_ref: SpecFromRef = spec_for_reference,
) -> Resolved:
    """The spec and the port one verify (or one MCP session) works on."""
    env_spec = resolve_spec(env, ref, spec, command=command, from_ref=from_ref)
    return Resolved(env_spec, resolve_port(env_spec, port, target), target)


def candidate_port(spec: EnvSpec, port: str, targets: list[str] | None) -> tuple[str, Path]:
    """(target, path) of a candidate ``--port`` (bench, profile, prompt --optimize), checked on
    the host without importing or building it: it exists, it is a port of the target asked
    for (``targets`` is ``--target``, at most one), and (JAX) its module can be found."""
    if targets and len(targets) > 1:
        raise BadInput(f"--port: give at most one --target with a candidate port, got {targets}")
    wanted = targets[0] if targets else None
    if wanted is not None:
        get_target(wanted)  # one line naming the targets there are
    path = existing_port(port).resolve()
    try:
        kind = target_of_port(path)
    except BadInput as e:
        raise BadInput(f"--port: {e}") from None
    if wanted is not None and kind.name != wanted:
        raise BadInput(f"--port: {port} is a {kind.name} port, not a {wanted} port")
    if kind.python_module:
        try:
            find_port_module(path, spec.name)
        except BadInput as e:
            raise BadInput(f"--port: {e}") from None
    return kind.name, path


def chosen_port(spec: EnvSpec, port: str | None, target: str) -> Path:
    """A candidate ``--port`` of ``target`` when given, else the shipped one."""
    return candidate_port(spec, port, [target])[1] if port else default_port(spec, target)


def spec_for_port(port: Path, env: str | None = None, spec: str | Path | None = None) -> EnvSpec:
    """The spec a port path ports: ``--spec``, else ``--env``'s, else the env named by the path
    (``generated/<env>/<target>[/<module>.py]``)."""
    if spec:
        return load_spec(spec)
    if env:
        return spec_for_name(env)
    for name in (port.stem, *reversed(port.resolve().parts)):
        try:
            return spec_for_name(name)
        except BadInput:
            continue
    raise BadInput(f"cannot tell which env {port} ports; pass --env or --spec")


def default_port(spec: EnvSpec, target: str = "jax") -> Path:
    get_target(target)  # an unknown target is refused by name
    rel = spec.port.get(target, f"generated/{spec.name}/{target}")
    for root in [*project_roots(), spec.root.parent.parent]:
        if (root / rel).exists():
            return root / rel
    raise BadInput(f"no {target} port found for {spec.name} at {rel}; pass --port")
