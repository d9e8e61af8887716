"""The Rust target: a PyO3 crate with an ``EnvBatch`` class (backends/rust.py)."""

from __future__ import annotations

from pathlib import Path

from envforge.targets.registry import Target


def recognise(path: Path) -> bool:
    return path.is_dir() and (path / "Cargo.toml").exists()


TARGET = Target(
    name="rust",
    title="Rust",
    recognise=recognise,
    driver="envforge.backends.rust:RustDriver",
    prompt_template="translate_rust.j2",
    code_lang="rust",
    workspace_port="port",
    workspace_main="port/src/lib.rs",
    preflight="envforge.translate.preflight:check_rust",
    host_prepare="envforge.native.rust_build:fetch_dependencies",
    compile_step="envforge.native.rust_build:build_extension",
    bench_job="envforge.bench.suite:_job_rust",
    make_batch="envforge.envs.make:rust_batch",
    source_globs=("src/**/*.rs",),
    tape_kit=True,
    profile="envforge.bench.profile_rust:run_profile_rust",
    profile_render="envforge.bench.profile_report:render_rust",
)
