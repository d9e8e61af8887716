"""What a sandboxed child needs from the host: its environment, the toolchain, the build caches."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import envforge
from envforge.errors import BadInput
from envforge.native.rust_build import rust_cache, toolchain
from envforge.sandbox.base import command_environment
from envforge.sandbox.image import system_mounts


def tool_directories() -> list[str]:
    """The Rust toolchain's bin directory (not rustup's proxies) and this Python's."""
    out = [str(Path(sys.executable).parent)]
    with contextlib.suppress(BadInput):
        out.insert(0, str(toolchain().bin_dir))
    return out


def child_environment(
    scratch: Path, realm: Path, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The allowed host variables, HOME and TMPDIR in the scratch dir, the build caches.

    The Rust build caches are named explicitly: their default lives under HOME, which the child
    sees as the scratch dir, and a child that looked there would find no vendored crates and,
    having no network, fail to fetch them."""
    env = command_environment()
    env.update(_common(scratch, os.environ.get("PATH", "/usr/bin:/bin")))
    env.update(sandbox_rust_cache(scratch, realm))
    env.update(extra or {})
    return env


def container_environment(
    scratch: Path, realm: Path, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The same for a container (the host's PATH means nothing there)."""
    env = command_environment()
    env.update(_common(scratch, "/usr/local/bin:/usr/bin:/bin"))
    env.update(sandbox_rust_cache(scratch, realm))
    env.update(extra or {})
    return env


def sandbox_realm(kind: str) -> Path:
    """A sandbox's own cache root (``docker/``, ``process/`` beside the host's Rust cache): the
    only cache its code may write. The host never loads anything from it."""
    root = rust_cache().root.parent / kind
    root.mkdir(parents=True, exist_ok=True)
    return root


def sandbox_rust_cache(scratch: Path, realm: Path) -> dict[str, str]:
    """The Rust cache a sandboxed build uses: cargo's target directory in the sandbox's realm
    (dependencies compile once per machine), the host's vendored crates and built modules
    read-only, and a ``lib/`` of its own in the scratch directory, so that a library one
    sandboxed run writes under another crate's name is never loaded by a later run."""
    _, host_lib, host_vendor = host_rust_cache()
    return {
        "ENVFORGE_RUST_CACHE": str(realm / "rust"),
        "ENVFORGE_RUST_VENDOR": str(host_vendor),
        "ENVFORGE_RUST_PREBUILT": str(host_lib),
        "ENVFORGE_RUST_LIB": str(scratch / "rust-lib"),
    }


def _common(scratch: Path, path: str) -> dict[str, str]:
    return {
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "PATH": os.pathsep.join([*tool_directories(), path]),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def python_roots() -> list[Path]:
    """Directories that hold this interpreter, its packages and envforge's own package (the
    package folder, not the folder above it: from a checkout that is the whole checkout, with
    its ``.git/config`` and ``.env`` files)."""
    roots = [
        Path(sys.base_prefix).resolve(),
        Path(sys.prefix).resolve(),
        Path(sys.executable).resolve().parent.parent,
        Path(envforge.__file__).resolve().parent,
    ]
    return outermost(roots)


def read_only_view(readable: tuple[Path, ...] = ()) -> list[Path]:
    """Every host path a sandbox shows its code, read-only (both sandboxes show the same): the
    system directories and loader files, the interpreter and its packages, envforge's package,
    the Rust toolchain, the host's built Rust modules and vendored crates, and ``readable``
    (the port). Nothing else of the host: not the checkout, not home folders, not ``/tmp``."""
    _, host_lib, host_vendor = host_rust_cache()
    for path in (host_lib, host_vendor):
        path.mkdir(parents=True, exist_ok=True)
    found = [*system_mounts(), *python_roots(), *rust_roots(), host_lib, host_vendor, *readable]
    return list(dict.fromkeys(p for p in found if p.exists()))


def rust_roots() -> list[Path]:
    """The toolchain's sysroot, when there is one."""
    try:
        return [toolchain().bin_dir.parent]
    except BadInput:
        return []


def host_rust_cache() -> tuple[Path, Path, Path]:
    """(cache root, built modules, vendored crates) of the host's Rust build cache."""
    cache = rust_cache()
    return cache.root, cache.lib, cache.vendor


def outermost(paths: list[Path]) -> list[Path]:
    """Distinct paths, dropping any that lies inside another one."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    out: list[Path] = []
    for p in unique:
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out
