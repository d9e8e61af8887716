"""The JAX target: a Python module with ``reset``/``step``/``observe`` (backends/jax.py)."""

from __future__ import annotations

from pathlib import Path

from envforge.targets.registry import Target

STRICT_XLA_FLAGS = "--xla_cpu_max_isa=SSE4_2"


def recognise(path: Path) -> bool:
    return path.suffix == ".py" or (path.is_dir() and any(path.glob("*.py")))


def import_jax(path: Path) -> None:
    """JAX's own import, so that the port's import is what the call timeout measures."""
    import jax.numpy  # noqa: F401


TARGET = Target(
    name="jax",
    title="JAX",
    recognise=recognise,
    driver="envforge.backends.jax:JaxDriver",
    driver_strict=False,
    prompt_template="translate_jax.j2",
    code_lang="python",
    workspace_port="port/{env}.py",
    workspace_main="port/{env}.py",
    preflight="envforge.translate.preflight:check_jax",
    compile_step="envforge.targets.jax:import_jax",
    # strict float: no FMA, which also means CPU (GPUs fuse multiply-adds too)
    strict_env={"XLA_FLAGS": STRICT_XLA_FLAGS, "JAX_PLATFORMS": "cpu"},
    bench_job="envforge.bench.suite:_job_jax",
    make_batch="envforge.envs.make:jax_batch",
    default_api="gymnax",
    python_module=True,
    profile="envforge.bench.profile:run_profile",
    profile_render="envforge.bench.profile_report:render",
)
