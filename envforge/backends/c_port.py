"""The C target's driver: a port written as a C header, compiled and driven like a C reference.

A C port is the form PufferLib's Ocean envs take: one header (``generated/<env>/c/<env>.h``)
with the env struct and its functions, no Python, no build system::

    typedef struct { double x; ...; int32_t time; } CartPole;   /* the spec's fields by name */
    void cartpole_reset(CartPole* env, uint32_t seed);
    void cartpole_step(CartPole* env, int32_t action,           /* const float* if continuous */
                       float* reward, uint8_t* terminated, uint8_t* truncated);
    void cartpole_observe(const CartPole* env, float* obs);

The struct and the prefix are read from the ``<prefix>_reset(<Struct>*`` declaration; the
struct's members carry the spec's field names (``c_field`` where the spec names one). The
driver is the C reference's (``backends/c.py``: the same shim, layout check and compiler
flags) given a ``[c]`` table that names the port's struct and prefix.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from envforge.backends.c import CDriver
from envforge.errors import BadInput, ContractViolation
from envforge.native.cc import c_compiler
from envforge.spec import EnvSpec
from envforge.spec.tables import CSettings

SUFFIXES = (".h", ".c")
RESET = re.compile(r"\bvoid\s+(?P<prefix>\w+)_reset\s*\(\s*(?P<struct>\w+)\s*\*")


def check_compiler() -> None:
    """The C target's preflight: the compiler the C backend will build with."""
    compiler = c_compiler()
    if compiler is None or shutil.which(compiler) is None:
        what = f"$CC={compiler!r} is not a program" if compiler else "no cc or gcc on PATH"
        raise BadInput(f"the C target needs a C compiler ({what}): install gcc or set CC")


def port_source(port: Path, env: str) -> Path:
    """The port's main file: ``port`` itself, else ``<env>.h`` (or ``.c``) in the folder, else
    the folder's only header (or C file)."""
    if port.is_file():
        return port
    for suffix in SUFFIXES:
        if (port / f"{env}{suffix}").is_file():
            return port / f"{env}{suffix}"
        found = sorted(port.glob(f"*{suffix}"))
        if len(found) == 1:
            return found[0]
    raise BadInput(f"{port}: expected {env}.h (or one .h file) holding the C port")


def port_settings(source: Path) -> CSettings:
    """The port's struct and function prefix, from its ``<prefix>_reset(<Struct>*``."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", source.read_text(), flags=re.S)
    match = RESET.search(text)
    if match is None:
        raise BadInput(
            f"{source}: no `void <prefix>_reset(<Struct>* env, uint32_t seed)` in the C port"
        )
    return CSettings(struct=match.group("struct"), prefix=match.group("prefix"))


def port_spec(spec: EnvSpec, source: Path) -> EnvSpec:
    """``spec`` with a ``[c]`` table for the port (the reference's own, if any, is not the
    port's: its sources and cflags belong to the reference)."""
    return spec.model_copy(update={"c": port_settings(source)})


class CPortDriver(CDriver):
    side = "port"

    def __init__(self, spec: EnvSpec, port: Path, strict_float: bool = False) -> None:
        source = port_source(port, spec.name)
        try:
            super().__init__(port_spec(spec, source), source, strict_float=strict_float)
        except ContractViolation as e:  # the C backend speaks of a reference
            raise ContractViolation("port", e.call, e.message, e.detail) from None

    def coverage_start(self) -> bool:
        return False  # coverage is counted on the reference

    def describe(self) -> str:
        return f"C port {self.reference.name}"
