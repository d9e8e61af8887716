"""Build a Rust port crate into a Python extension with maturin, cached by content hash.

Two phases, so that only the first needs the network and only the second runs crate code:

* ``fetch_dependencies`` (host side, trusted): ``cargo generate-lockfile`` when the crate has
  no ``Cargo.lock``, then ``cargo vendor`` into the shared vendor directory. Neither runs
  build scripts or compiles anything.
* ``build_extension`` (may run inside a sandbox without network): ``maturin build --release
  --offline`` against the vendored sources, one cargo target directory shared by every crate
  (so pyo3/numpy/rayon compile once per machine), the extension module copied out of the wheel
  into ``lib/<module>-<hash>.so``. The hash covers the crate's files, the toolchain, maturin
  and the Python version, so an unchanged crate is never rebuilt.

Layout under ``$ENVFORGE_RUST_CACHE`` (default ``$ENVFORGE_CACHE/rust``, ``~/.cache/envforge/rust``):
``lib/`` built modules, ``target/`` cargo's, ``vendor/`` crate sources, ``cargo-home/`` the offline
config. Everything in it is keyed by content, so CI may keep it across runs.
``ENVFORGE_RUST_VENDOR`` overrides the vendor directory, ``ENVFORGE_RUST_PREBUILT`` lists
extra read-only ``lib`` directories to look in and ``ENVFORGE_RUST_LIB`` moves ``lib/`` (all
three used by the sandboxes, see envforge/sandbox/paths.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from envforge.cache import cache_root
from envforge.errors import BadInput, ContractViolation
from envforge.native.cargo_sources import check_sources, fetch_environment, write_cargo_config
from envforge.untrusted.input_files import InputFileError, load_toml

BUILD_TIMEOUT_S = 1200
CRATE_FILES = ("Cargo.toml", "Cargo.lock", "build.rs", "pyproject.toml")
BUILD_RECIPE = 2
"""Part of every build hash; raised when a change to how crates are built makes libraries
built before it untrustworthy (2: each build cleans the crate's own artifacts first; until
then a crate could be handed the library of another crate of the same package name)."""


@dataclass(frozen=True)
class RustCache:
    root: Path
    vendor: Path
    prebuilt: tuple[Path, ...] = ()
    lib_dir: Path | None = None
    """Where built modules go, when not ``root/lib``."""

    @property
    def lib(self) -> Path:
        return self.lib_dir or self.root / "lib"

    @property
    def target(self) -> Path:
        return self.root / "target"

    @property
    def cargo_home(self) -> Path:
        return self.root / "cargo-home"


def rust_cache() -> RustCache:
    root = Path(os.environ.get("ENVFORGE_RUST_CACHE") or cache_root() / "rust")
    vendor = Path(os.environ.get("ENVFORGE_RUST_VENDOR") or root / "vendor")
    prebuilt = tuple(Path(p) for p in os.environ.get("ENVFORGE_RUST_PREBUILT", "").split(":") if p)
    lib = os.environ.get("ENVFORGE_RUST_LIB")
    return RustCache(root, vendor, prebuilt, Path(lib) if lib else None)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (builds share one cargo target directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---- the crate --------------------------------------------------------------------------------


def _manifest(crate: Path) -> dict:
    manifest = crate / "Cargo.toml"
    if not manifest.is_file():
        raise BadInput(f"{crate}: not a Rust crate (no Cargo.toml)")
    try:
        return load_toml(manifest, "Cargo.toml", follow_links=False)
    except InputFileError as e:
        raise ContractViolation("port", "build", f"Cargo.toml: {e.reason}") from None
    except tomllib.TOMLDecodeError as e:
        raise ContractViolation("port", "build", f"Cargo.toml does not parse: {e}") from None


def module_name(crate: Path) -> str:
    """The extension's import name: ``[lib] name``, else the package name with ``-`` as ``_``."""
    data = _manifest(crate)
    name = data.get("lib", {}).get("name") or data.get("package", {}).get("name")
    if not isinstance(name, str) or not name:
        raise ContractViolation("port", "build", "Cargo.toml names no package or [lib]")
    return name.replace("-", "_")


def package_name(crate: Path) -> str:
    name = _manifest(crate).get("package", {}).get("name")
    if not isinstance(name, str) or not name:
        raise ContractViolation("port", "build", "Cargo.toml names no [package]")
    return name


def crate_files(crate: Path) -> list[Path]:
    files = [crate / name for name in CRATE_FILES if (crate / name).is_file()]
    return files + sorted(p for p in (crate / "src").rglob("*") if p.is_file())


# ---- the toolchain ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Toolchain:
    cargo: str
    maturin: str
    bin_dir: Path
    """The toolchain's own bin directory (rustc, cargo), used instead of rustup proxies."""
    identity: str
    """rustc -vV plus maturin --version: part of every build hash."""


@lru_cache(maxsize=1)
def toolchain() -> Toolchain:
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    venv_maturin = Path(sys.executable).parent / "maturin"
    maturin = shutil.which("maturin") or (str(venv_maturin) if venv_maturin.exists() else None)
    if cargo is None:
        raise BadInput("no Rust toolchain found: install cargo (https://rustup.rs) or set CARGO")
    if maturin is None:
        raise BadInput("maturin not found: pip install maturin")
    rustc = shutil.which("rustc", path=str(Path(cargo).parent)) or "rustc"
    version = _output([rustc, "-vV"])
    sysroot = Path(_output([rustc, "--print", "sysroot"]).strip())
    identity = version + _output([maturin, "--version"])
    return Toolchain(cargo, maturin, sysroot / "bin", identity)


def _output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BadInput(f"cannot run {cmd[0]}: {e}") from None


def offline_cargo(cache: RustCache) -> dict[str, str]:
    """Variables that make cargo build offline from the vendored sources, into the shared target
    directory (also given to sandboxed agent commands, so their builds work and reuse deps)."""
    config = (
        '[source.crates-io]\nreplace-with = "envforge-vendored"\n\n'
        f'[source.envforge-vendored]\ndirectory = "{cache.vendor}"\n\n[net]\noffline = true\n'
    )
    # a sandbox's cargo home is writable by its code: never follow a link or read a FIFO there
    write_cargo_config(cache.cargo_home, config, anchor=cache.root.parent)
    return {
        "CARGO_HOME": str(cache.cargo_home),
        "CARGO_TARGET_DIR": str(cache.target),
        "CARGO_NET_OFFLINE": "true",
    }


def build_environment(cache: RustCache) -> dict[str, str]:
    """Environment for an offline cargo/maturin run against the vendored sources."""
    tools = toolchain()
    env = dict(os.environ)
    env.update(offline_cargo(cache))
    env["PATH"] = os.pathsep.join(
        [str(tools.bin_dir), str(Path(tools.maturin).parent), env["PATH"]]
    )
    env.pop("RUSTC_WRAPPER", None)
    return env


# ---- phase 1: dependencies (network, no crate code runs) -------------------------------------


def fetch_dependencies(crate: Path, cache: RustCache | None = None) -> None:
    """Lock and vendor the crate's dependencies, unless this lock file was vendored already."""
    cache = cache or rust_cache()
    module_name(crate)  # a clear error for a missing or malformed manifest
    tools = toolchain()
    manifest = str(crate / "Cargo.toml")
    lock = crate / "Cargo.lock"
    if lock.is_symlink() or (lock.exists() and not lock.is_file()):
        # the agent's commands can write the crate: reading a FIFO here would block for ever
        raise ContractViolation("port", "build", "Cargo.lock is not a regular file")
    check_sources(crate)  # only crates.io or the crate itself: cargo follows what it names
    with _locked(cache.root / "vendor.lock"):
        if not lock.is_file():
            _run_fetch([tools.cargo, "generate-lockfile", "--manifest-path", manifest], cache)
        marker = cache.vendor / ".envforge" / hashlib.sha256(lock.read_bytes()).hexdigest()
        if marker.exists():
            return
        _run_fetch(
            [
                tools.cargo,
                "vendor",
                "--versioned-dirs",
                "--no-delete",
                "--manifest-path",
                manifest,
                str(cache.vendor),
            ],
            cache,
        )
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()


def _run_fetch(cmd: list[str], cache: RustCache) -> None:
    # git made unusable, and a working directory whose .cargo/config the port does not write
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env=fetch_environment(), cwd=cache.root
    )
    if proc.returncode != 0:
        raise ContractViolation(
            "port", "build", f"fetching the crate's dependencies failed:\n{proc.stderr[-3000:]}"
        )


# ---- phase 2: build (offline; runs build scripts and proc macros) -----------------------------


def build_hash(crate: Path) -> str:
    """Crate files, toolchain, and the interpreter's ABI (not its path: venvs share builds)."""
    digest = hashlib.sha256()
    digest.update(toolchain().identity.encode())
    abi = sysconfig.get_config_var("EXT_SUFFIX") or ""
    digest.update(f"{sys.version}|{abi}|release|recipe {BUILD_RECIPE}".encode())
    for path in crate_files(crate):
        digest.update(str(path.relative_to(crate)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cached_extension(crate: Path, cache: RustCache | None = None) -> Path | None:
    cache = cache or rust_cache()
    name = f"{module_name(crate)}-{build_hash(crate)}.so"
    for directory in (cache.lib, *cache.prebuilt):
        if (directory / name).is_file():
            return directory / name
    return None


def build_extension(crate: Path, cache: RustCache | None = None) -> Path:
    """The built extension module for ``crate`` (built now unless cached)."""
    cache = cache or rust_cache()
    crate = crate.resolve()
    found = cached_extension(crate, cache)
    if found is not None:
        return found
    fetch_dependencies(crate, cache)
    name = module_name(crate)
    library = cache.lib / f"{name}-{build_hash(crate)}.so"
    cache.lib.mkdir(parents=True, exist_ok=True)
    with _locked(cache.root / "build.lock"), tempfile.TemporaryDirectory() as wheels:
        if library.is_file():  # built by another process while we waited for the lock
            return library
        environment = build_environment(cache)
        _clean_package(crate, environment)
        cmd = [
            toolchain().maturin,
            "build",
            "--release",
            "--offline",
            "--manifest-path",
            str(crate / "Cargo.toml"),
            "--interpreter",
            sys.executable,
            "--out",
            wheels,
            "--auditwheel",
            "skip",
        ]
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                env=environment,
                cwd=crate,
            )
        except subprocess.TimeoutExpired:
            raise ContractViolation(
                "port", "build", f"cargo build did not finish within {BUILD_TIMEOUT_S} s"
            ) from None
        if proc.returncode != 0:
            raise ContractViolation(
                "port", "build", "cargo build failed:\n" + compiler_errors(proc.stderr)
            )
        _extract_module(Path(wheels), name, library)
    return library


def _clean_package(crate: Path, environment: dict[str, str]) -> None:
    """Remove this package's own artifacts from the shared target directory (its dependencies'
    stay), so that cargo compiles it from these files.

    Cargo keys a root package's artifacts by name and version, not by where its files are, and
    judges them fresh by file times: a crate whose files were written before the last build of
    another crate of the same package name (two campaign workers write their mutants at about
    the same time, then build them one after the other) was handed that crate's library."""
    cmd = [toolchain().cargo, "clean", "--release", "--offline", "-p", package_name(crate)]
    cmd += ["--manifest-path", str(crate / "Cargo.toml")]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=120, env=environment, cwd=crate
        )
    except subprocess.TimeoutExpired:
        raise ContractViolation("port", "build", "cargo clean did not finish in 120 s") from None
    if proc.returncode != 0:
        raise ContractViolation(
            "port", "build", "cargo clean failed:\n" + compiler_errors(proc.stderr)
        )


def _maturin_status(line: str) -> bool:
    """maturin's progress lines (``🐍 Found CPython 3.11 at ...``) begin with an emoji."""
    text = line.strip()
    return bool(text) and ord(text[0]) > 0x2000


def compiler_errors(stderr: str, limit: int = 4000) -> str:
    """The compiler's diagnostics without cargo's progress lines, clipped from the front."""
    noise = ("Compiling ", "Downloaded ", "Locking ", "Updating ", "Blocking ", "Finished ")
    lines = [
        line
        for line in stderr.splitlines()
        if not line.strip().startswith(noise) and not _maturin_status(line)
    ]
    text = "\n".join(lines).strip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _extract_module(wheels: Path, name: str, library: Path) -> None:
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise ContractViolation("port", "build", "maturin produced no wheel")
    with zipfile.ZipFile(found[0]) as wheel:
        members = [
            m
            for m in wheel.namelist()
            if Path(m).name.startswith(f"{name}.") and m.endswith((".so", ".pyd"))
        ]
        if not members:
            raise ContractViolation(
                "port", "build", f"the wheel holds no extension module named {name}"
            )
        tmp = library.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(wheel.read(members[0]))
    tmp.replace(library)  # atomic: a concurrent reader never loads half a library


def fetch_workspace_dependencies(workspace: Path, max_depth: int = 3) -> list[str]:
    """Vendor the dependencies of every crate in a workspace (before a sandboxed command runs
    there without network). Returns the problems met, for the caller to show or ignore."""
    problems = []
    for root, dirs, files in os.walk(workspace):
        depth = len(Path(root).relative_to(workspace).parts)
        # never descend into build output or hidden folders (target/ can hold thousands of files)
        dirs[:] = [] if depth >= max_depth else [d for d in dirs if d != "target" and d[0] != "."]
        if "Cargo.toml" in files:
            try:
                fetch_dependencies(Path(root))
            except (BadInput, ContractViolation) as e:
                problems.append(f"{root}: {e}")
    return problems
