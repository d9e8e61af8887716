"""What cargo may read on the host, and the cargo config the host writes where sandboxes write.

The host's fetch step (``rust_build.fetch_dependencies``) runs cargo with the network, on a
crate an agent or a port wrote. Cargo follows whatever the manifest names: a ``git = "http://
127.0.0.1:PORT/<data>.git"`` dependency made the host send requests (with data in the URL)
wherever the port chose. So, before cargo runs, the manifest (every dependency table, target-
specific ones, ``[patch]``, ``[replace]``, the workspace) and the lock file are read here, and
anything but a crates.io requirement or a path inside the crate is refused with a finding.
Cargo then runs with settings under which it cannot fetch git at all (:func:`fetch_environment`),
from a working directory the port does not control (no ``.cargo/config.toml`` of its own).

The sandboxes' cargo home lies in a cache the sandboxed code may write, so the host writes its
``config.toml`` there (:func:`write_cargo_config`) without following links and without reading
a FIFO: it compares what a regular file holds and otherwise replaces the name atomically.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tomllib
from pathlib import Path

from envforge.errors import ContractViolation
from envforge.untrusted.input_files import parse_toml
from envforge.untrusted.regular import FILE_FLAGS, KINDS, NotPlainFile, opened, read_fd

MANIFEST_CAP = 1 << 20
LOCK_CAP = 8 << 20
DEPENDENCY_TABLES = (
    "dependencies",
    "dev-dependencies",
    "dev_dependencies",
    "build-dependencies",
    "build_dependencies",
)
CRATES_IO = (
    "registry+https://github.com/rust-lang/crates.io-index",
    "sparse+https://index.crates.io/",
)


def read_regular(path: Path, cap: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of at most ``cap`` bytes, by the one rule
    (no link followed, no FIFO opened); None when it does not exist. Raises
    ContractViolation for anything else."""
    try:
        with opened(path) as fd:
            if os.fstat(fd).st_size > cap:
                raise ContractViolation("port", "build", f"{path.name} is over {cap} bytes")
            return read_fd(fd, cap, path.name)
    except NotPlainFile as e:
        if e.why == "not found":
            return None
        if e.why in KINDS or e.why.startswith("a hard link"):
            raise ContractViolation(
                "port", "build", f"{path.name} is not a regular file ({e.why})"
            ) from None
        raise ContractViolation("port", "build", f"{path.name}: {e.why}") from None


def _parse(path: Path, cap: int) -> dict:
    data = read_regular(path, cap)
    if data is None:
        return {}
    try:
        return parse_toml(data.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:  # too deep: TomlTooDeep
        raise ContractViolation("port", "build", f"{path.name} does not parse: {e}") from None


def _inside(crate: Path, relative: object) -> bool:
    if not isinstance(relative, str):
        return False
    root = crate.resolve()
    target = (root / relative).resolve()
    return target == root or root in target.parents


def _dependency_problems(crate: Path, where: str, table: object) -> list[str]:
    if not isinstance(table, dict):
        return [f"{where} is not a table"] if table is not None else []
    problems = []
    for name, spec in table.items():
        if not isinstance(spec, dict):
            continue  # "1.2": a crates.io version requirement
        label = f"{where}.{name}"
        if "git" in spec:
            problems.append(f"{label} is a git dependency ({spec['git']!r})")
        if "registry" in spec or "registry-index" in spec:
            what = spec.get("registry-index", spec.get("registry"))
            problems.append(f"{label} names a registry other than crates.io ({what!r})")
        if "path" in spec and not _inside(crate, spec["path"]):
            problems.append(f"{label} is a path dependency outside the crate ({spec['path']!r})")
    return problems


def _tables(manifest: dict) -> list[tuple[str, object]]:
    """Every dependency table of a manifest, with its name as the finding shows it."""
    out: list[tuple[str, object]] = [(t, manifest.get(t)) for t in DEPENDENCY_TABLES]
    targets = manifest.get("target", {})
    if isinstance(targets, dict):
        for cfg, section in targets.items():
            if isinstance(section, dict):
                out += [(f"target.{cfg}.{t}", section.get(t)) for t in DEPENDENCY_TABLES]
    workspace = manifest.get("workspace", {})
    if isinstance(workspace, dict):
        out.append(("workspace.dependencies", workspace.get("dependencies")))
    patches = manifest.get("patch", {})
    if isinstance(patches, dict):
        out += [(f"patch.{source}", table) for source, table in patches.items()]
    return out


def foreign_sources(crate: Path) -> list[str]:
    """Why cargo would read something other than crates.io or the crate itself ([] if nothing)."""
    manifest = _parse(crate / "Cargo.toml", MANIFEST_CAP)
    problems = []
    for where, table in _tables(manifest):
        problems += _dependency_problems(crate, where, table)
    for source in manifest.get("patch", {}) if isinstance(manifest.get("patch"), dict) else ():
        if source != "crates-io":
            problems.append(f"patch.{source} patches a source other than crates.io")
    if manifest.get("replace"):
        problems.append("[replace] is not allowed (use crates.io versions)")
    workspace = manifest.get("workspace", {})
    members = workspace.get("members", []) if isinstance(workspace, dict) else []
    for member in members if isinstance(members, list) else [members]:
        if not _inside(crate, member):
            problems.append(f"workspace.members names {member!r}, outside the crate")
    package = manifest.get("package", {})
    if (
        isinstance(package, dict)
        and "workspace" in package
        and not _inside(crate, package["workspace"])
    ):
        problems.append(f"package.workspace names {package['workspace']!r}, outside the crate")
    lock = _parse(crate / "Cargo.lock", LOCK_CAP)
    packages = lock.get("package", [])
    for entry in packages if isinstance(packages, list) else []:
        source = entry.get("source") if isinstance(entry, dict) else None
        if source is not None and not (isinstance(source, str) and source.startswith(CRATES_IO)):
            problems.append(f"Cargo.lock takes {entry.get('name')!r} from {source!r}")
    return problems


def check_sources(crate: Path) -> None:
    """ContractViolation naming what the crate would fetch from elsewhere than crates.io."""
    problems = foreign_sources(crate)
    if problems:
        shown = "\n".join(f"- {p}" for p in problems[:20])
        raise ContractViolation(
            "port",
            "build",
            "the crate's dependencies must come from crates.io (fetched and vendored on the "
            f"host) or lie inside the crate; refused before cargo ran:\n{shown}",
        )


def fetch_environment() -> dict[str, str]:
    """The host's environment for cargo's fetch, with git made unusable: cargo hands git to
    the git program, which is allowed no protocol at all; crates.io is read over HTTP (sparse)."""
    env = dict(os.environ)
    env.update(
        {
            "CARGO_NET_GIT_FETCH_WITH_CLI": "true",
            "GIT_ALLOW_PROTOCOL": "none",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "CARGO_REGISTRIES_CRATES_IO_PROTOCOL": "sparse",
        }
    )
    for name in list(env):
        if name.startswith(("CARGO_SOURCE_", "CARGO_REGISTRIES_")) and name != (
            "CARGO_REGISTRIES_CRATES_IO_PROTOCOL"
        ):
            del env[name]
    return env


# ---- the sandboxes' cargo config ----------------------------------------------------------


def _open_directory(parent: int, name: str) -> int:
    """``name`` under the directory ``parent`` as a directory, made fresh if it was anything
    else (a link the sandbox left there is removed, never followed)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError:  # ELOOP or ENOTDIR: a link or a file
        _remove(parent, name)
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent)
    return os.open(name, flags, dir_fd=parent)


def _remove(parent: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    try:
        for entry in os.listdir(child):
            _remove(child, entry)
    finally:
        os.close(child)
    os.rmdir(name, dir_fd=parent)


def _holds(directory: int, name: str, data: bytes) -> bool:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=directory)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size != len(data):
            return False
        return os.read(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def write_cargo_config(cargo_home: Path, text: str, anchor: Path) -> None:
    """Make ``cargo_home/config.toml`` a regular file holding ``text``.

    ``anchor`` is a directory above ``cargo_home`` that sandboxed code cannot replace (the
    cache root); every directory below it is entered without following links. A file that
    already holds ``text`` is left alone; anything else (a link, a FIFO, other content) is
    replaced by renaming a new file over the name, which never writes through a link. Cargo's
    older ``config`` name, which would win over ``config.toml``, is removed."""
    data = text.encode()
    parts = cargo_home.relative_to(anchor).parts
    anchor.mkdir(parents=True, exist_ok=True)
    directory = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            inner = _open_directory(directory, part)
            os.close(directory)
            directory = inner
        _remove(directory, "config")
        if _holds(directory, "config.toml", data):
            return
        temporary = f".config.toml.{os.getpid()}.tmp"
        _remove(directory, temporary)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o644, dir_fd=directory)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        try:
            os.rename(temporary, "config.toml", src_dir_fd=directory, dst_dir_fd=directory)
        except OSError:  # a directory by that name
            _remove(directory, "config.toml")
            os.rename(temporary, "config.toml", src_dir_fd=directory, dst_dir_fd=directory)
    finally:
        os.close(directory)
