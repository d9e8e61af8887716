"""What a translation will need, checked before the first model call.

The verifier builds and runs the reference and the port; a missing compiler, maturin or crate
found only then has cost an agent episode (a crate written, then "maturin not found"). Each
check here looks for the same thing, the same way, as the code that will use it.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

from envforge.errors import BadInput, EnvforgeError
from envforge.native.rust_crates import RUST_CRATES, RustCrate
from envforge.spec import EnvSpec


def check_translate(spec: EnvSpec, target: str, transfer: bool = False) -> None:
    """Raise BadInput (one line) naming the first thing the verifier would lack."""
    from envforge.backends.recipe import reference_recipe
    from envforge.targets import get_target

    preflight = get_target(target).load_code("preflight")  # an unknown target first
    reference_recipe(spec)  # a missing reference file, an unsupported language
    check_reference_tools(spec)
    if transfer:  # L4 trains with the JAX PPO whatever the target
        check_jax()
    if preflight is not None:
        preflight()


def check_reference_tools(spec: EnvSpec) -> None:
    kind = spec.reference_kind
    if kind == "c":
        from envforge.native.cc import c_compiler

        compiler = c_compiler()
        if compiler is None or shutil.which(compiler) is None:
            what = f"$CC={compiler!r} is not a program" if compiler else "no cc or gcc on PATH"
            raise BadInput(f"the C reference needs a C compiler ({what}): install gcc or set CC")
    elif kind == "node" and shutil.which("node") is None:
        raise BadInput("the JavaScript reference needs node on PATH: install Node.js")
    elif kind == "gymnasium" and importlib.util.find_spec("gymnasium") is None:
        raise BadInput("the gymnasium reference needs gymnasium: pip install gymnasium")


def check_jax() -> None:
    if importlib.util.find_spec("jax") is None:
        raise BadInput("the JAX target needs JAX: pip install jax")


def check_rust() -> None:
    """cargo and maturin as the build finds them, then the crates vendored (or fetched now)."""
    from envforge.native.rust_build import rust_cache, toolchain

    toolchain.cache_clear()  # PATH may have changed since an earlier lookup in this process
    try:
        toolchain()
    except BadInput as e:
        raise BadInput(f"the Rust target: {e}") from None
    cache = rust_cache()
    missing = [c for c in RUST_CRATES if not c.vendored_in(cache.vendor)]
    if missing:
        _vendor(missing, cache.root)


def _vendor(crates: list[RustCrate], cache_root: Path) -> None:
    """Vendor the crates through a scratch crate that depends on them (needs the network once)."""
    from envforge.native.rust_build import fetch_dependencies

    names = ", ".join(f"{c.name} {c.version}" for c in crates)
    cache_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_root, prefix="preflight-") as scratch:
        crate = Path(scratch)
        (crate / "src").mkdir()
        (crate / "src" / "lib.rs").write_text("")
        dependencies = "\n".join(c.requirement() for c in RUST_CRATES)
        (crate / "Cargo.toml").write_text(
            '[package]\nname = "envforge_preflight"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f"[dependencies]\n{dependencies}\n"
        )
        try:
            fetch_dependencies(crate)
        except EnvforgeError as e:
            last = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise BadInput(
                f"the Rust target needs the crates {names}, not vendored and not fetchable "
                f"(offline?): {last}"
            ) from None
