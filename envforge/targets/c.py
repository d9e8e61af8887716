"""The C target: a header with the env struct and its reset/step/observe (backends/c_port.py),
compiled and driven as the C references are."""

from __future__ import annotations

from pathlib import Path

from envforge.targets.registry import Target

SUFFIXES = (".h", ".c")


def recognise(path: Path) -> bool:
    """A ``.h``/``.c`` file, or a folder holding one and no Rust crate or Python module."""
    if path.is_file():
        return path.suffix in SUFFIXES
    return (
        path.is_dir()
        and any(p.suffix in SUFFIXES for p in path.iterdir())
        and not (path / "Cargo.toml").exists()
        and not any(path.glob("*.py"))
    )


TARGET = Target(
    name="c",
    title="C",
    recognise=recognise,
    driver="envforge.backends.c_port:CPortDriver",
    prompt_template="translate_c.j2",
    code_lang="c",
    workspace_port="port/{env}.h",
    workspace_main="port/{env}.h",
    preflight="envforge.backends.c_port:check_compiler",
    bench_job="envforge.bench.c_port_loop:job_c_port",
    make_batch="envforge.backends.c_port_batch:c_batch",
    source_globs=("*.h", "*.c"),
)
