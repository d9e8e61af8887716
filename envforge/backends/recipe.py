"""Recipes: picklable descriptions of how to build a Driver, and the one place that builds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envforge.backends.base import Driver
from envforge.backends.reference_check import check_reference
from envforge.errors import BadInput, PortNotFound
from envforge.spec import EnvSpec
from envforge.targets import get_target, target_of_port
from envforge.targets.jax import STRICT_XLA_FLAGS as STRICT_XLA_FLAGS


@dataclass(frozen=True)
class Recipe:
    kind: str
    """A reference's kind (c | gymnasium | pettingzoo | python | node) or, on the port side, a target's
    name (``envforge/targets``)."""
    spec: EnvSpec
    target: str
    """Reference id or path of the implementation."""
    side: str = "port"
    strict_float: bool = False
    env: dict[str, str] = field(default_factory=dict)
    label: str | None = None
    """Who this implementation is in failures, when not its side's name: another version of a
    reference, built as a reference but verified on the port side (``v2 (duel/v2.py)``)."""

    @property
    def named(self) -> str:
        """The side its failures name: the label, else ``port`` or ``reference``."""
        return self.label or self.side


def reference_recipe(spec: EnvSpec, strict_float: bool | None = None) -> Recipe:
    strict = spec.compare.strict_float if strict_float is None else strict_float
    kind = spec.reference_kind
    check_reference(spec)  # what a build in a child would find late, found here at once
    target = spec.reference
    path = spec.reference_path()
    if path is not None:
        whole_file = kind in ("c", "node")
        target = str(path) if whole_file else f"{path}:{spec.reference.rsplit(':', 1)[1]}"
    return Recipe(kind=kind, spec=spec, target=target, side="reference", strict_float=strict)


def port_kind(port: Path) -> str:
    """The name of the target whose port ``port`` is."""
    return target_of_port(port).name


def port_recipe(spec: EnvSpec, port: str | Path, strict_float: bool | None = None) -> Recipe:
    path = Path(port)
    if not path.exists():
        raise PortNotFound(path)
    strict = spec.compare.strict_float if strict_float is None else strict_float
    target = target_of_port(path)
    env = dict(target.strict_env) if strict else {}
    return Recipe(
        kind=target.name,
        spec=spec,
        target=str(path.resolve()),
        side="port",
        strict_float=strict,
        env=env,
    )


def compile_step(recipe: Recipe) -> Driver | None:
    """The part of building ``recipe``'s driver that the build limit covers, run first by a
    driver server (``backends/isolated.serve_recipe``): the port target's ``compile_step`` (a
    Rust port's cargo build, JAX's own import, not the port's), or a whole reference (our own
    code; a C reference compiles in its constructor), returned built. The rest, importing the
    port, falls under the call timeout."""
    if recipe.side == "reference":
        return build_driver(recipe)
    step = get_target(recipe.kind).load_code("compile_step")
    if step is not None:
        step(Path(recipe.target))  # cached: the driver finds it built
    return None


def build_driver(recipe: Recipe) -> Driver:
    """Build the driver a recipe describes, in this process."""
    driver: Driver
    if recipe.side == "port":
        target = get_target(recipe.kind)
        driver_class = target.load_code("driver")
        path = Path(recipe.target)
        if target.driver_strict:
            driver = driver_class(recipe.spec, path, strict_float=recipe.strict_float)
        else:
            driver = driver_class(recipe.spec, path)
    elif recipe.kind == "c":
        from envforge.backends.c import CDriver

        driver = CDriver(recipe.spec, Path(recipe.target), strict_float=recipe.strict_float)
    elif recipe.kind == "gymnasium":
        from envforge.backends.gymnasium import GymnasiumDriver

        driver = GymnasiumDriver(recipe.spec, recipe.target.split(":", 1)[1])
    elif recipe.kind == "pettingzoo":
        from envforge.backends.pettingzoo import PettingZooDriver

        driver = PettingZooDriver(recipe.spec, recipe.target.split(":", 1)[1])
    elif recipe.kind == "python":
        from envforge.backends.python import PythonDriver

        driver = PythonDriver(recipe.spec, recipe.target)
    elif recipe.kind == "node":
        from envforge.backends.node import NodeDriver

        driver = NodeDriver(recipe.spec, Path(recipe.target))
    else:
        raise BadInput(f"unsupported implementation kind: {recipe.kind}")
    driver.side = recipe.named
    return driver


def open_driver(
    recipe: Recipe,
    isolate: bool = True,
    timeout_s: float | None = None,
    build_timeout_s: float | None = None,
) -> Driver:
    """Build a driver, by default in its own process (see backends/isolated.py); in a sandbox,
    ``sandbox.driver.open_sandboxed`` opens it. ``timeout_s`` (default: the spec's) limits
    every call and the port's import, ``build_timeout_s`` its compiling."""
    if not isolate:
        return build_driver(recipe)
    from envforge.backends.isolated import BUILD_TIMEOUT_S, IsolatedDriver

    return IsolatedDriver(
        recipe,
        timeout_s=timeout_s or recipe.spec.verify.timeout_s,
        build_timeout_s=build_timeout_s or BUILD_TIMEOUT_S,
    )
