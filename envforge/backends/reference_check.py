"""Cheap checks of a reference before any child process, compiler or JIT starts.

What a reference's own build would find late, and report from inside a child process, is
found here in the verifier's process in milliseconds: a missing, empty, binary or non-UTF-8
source, a C struct the backend cannot lay out (pointer or unsupported members), struct members
the spec names but the struct lacks, no C compiler, a gymnasium id that is not registered.
Each is a :class:`BrokenReference` naming the file and the problem in one line.
:func:`build_reference` goes one step further where a wasted step would cost money (before an
agent's first model call): it builds the reference once in a child process.
"""

from __future__ import annotations

from pathlib import Path

from envforge.errors import BadInput, BrokenReference, DriverFailure
from envforge.spec import EnvSpec


def check_reference(spec: EnvSpec) -> None:
    """Raise BrokenReference when the spec's reference cannot be what the spec says it is."""
    kind = spec.reference_kind
    if kind == "gymnasium":
        _check_gymnasium_id(spec.reference.split(":", 1)[1])
        return
    if kind == "pettingzoo":
        _check_module_name(spec.reference.split(":", 1)[1], spec.reference)
        return
    if spec.reference_module is not None:
        _check_module_name(spec.reference_module, spec.reference_module)
        return
    path = spec.reference_path()
    if path is None:
        return
    source = read_source(path)
    if kind == "c":
        _check_c(spec, source)
    elif kind == "node":
        from envforge.backends.node import field_paths, node_executable

        node_executable()
        field_paths(spec)
    elif kind == "python":
        name = spec.reference.rsplit(":", 1)[1]
        if not name.isidentifier():
            raise BrokenReference(f"{spec.reference}: {name!r} is not a Python class name")


def read_source(path: Path) -> str:
    """The text of a reference source file: a regular, non-empty, UTF-8 file."""
    if not path.exists():
        raise BrokenReference(f"reference file not found: {path}")
    if not path.is_file():
        raise BrokenReference(f"reference {path} is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BrokenReference(f"cannot read reference {path}: {e.strerror}") from None
    if not data.strip():
        raise BrokenReference(f"reference {path} is empty")
    if b"\0" in data:
        raise BrokenReference(f"reference {path} is a binary file, not source code")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BrokenReference(
            f"reference {path} is not UTF-8 text (byte {e.start}: 0x{data[e.start]:02x})"
        ) from None


def _check_c(spec: EnvSpec, source: str) -> None:
    from envforge.native.c_struct import parse_struct
    from envforge.native.cc import c_compiler

    assert spec.c is not None  # the spec loader requires a [c] table for a C reference
    try:
        members = parse_struct(source, spec.c.struct)
    except BadInput as e:
        raise BrokenReference(f"{spec.reference_path()}: {e}") from None
    names = {name for name, _, _ in members}
    missing = [f.c_field or f.name for f in spec.state if (f.c_field or f.name) not in names]
    if missing:
        raise BrokenReference(
            f"{spec.reference_path()}: struct {spec.c.struct} has no member(s) "
            f"{', '.join(missing)} that the spec's state names"
        )
    for extra in spec.c.sources:
        read_source(spec.root / extra)
    if c_compiler() is None:
        raise BadInput("no C compiler found (install cc/gcc or set CC)")


def _check_module_name(name: str, label: str) -> None:
    """A PettingZoo reference or a ``pkg.module:Class`` names an installed module (found
    without importing it; the driver's child imports it)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # its package is not installed
        found = None
    if found is None:
        raise BrokenReference(f"{label}: no such module is installed")


def _check_gymnasium_id(env_id: str) -> None:
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        raise BadInput("gymnasium references need gymnasium installed") from None
    from envforge.backends.gym_ids import check_id

    try:
        check_id(env_id)
    except BadInput as e:
        raise BrokenReference(str(e)) from None


def build_reference(spec: EnvSpec, strict_float: bool | None = None) -> None:
    """Check the reference, then build it once in its own process (a C compile, an import,
    ``gymnasium.make``): a reference that cannot build is a BrokenReference here, before any
    model is paid to port it. A C build is cached, so the first verify reuses it."""
    check_reference(spec)
    from envforge.backends.recipe import open_driver, reference_recipe

    try:
        driver = open_driver(reference_recipe(spec, strict_float), isolate=True)
    except DriverFailure as e:
        raise BrokenReference(
            f"the reference failed in {e.call}: {first_line(e.message)}"
        ) from None
    driver.close()


def first_line(message: str, limit: int = 300) -> str:
    """One line for a person: the message's first line, and the first line of tool output
    under it that says "error" (a compiler's first diagnostic) when there is one."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    text = lines[0]
    if len(lines) > 1:
        text += " " + next((line for line in lines[1:] if "error" in line.lower()), lines[1])
    return text if len(text) <= limit else text[: limit - 3] + "..."
