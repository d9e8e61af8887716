"""Python backend: a reference class with gymnasium's API, driven like a gymnasium env.

The target is ``path/to/file.py:ClassName`` or ``pkg.module:ClassName`` (a class of an
installed module, imported by name). The class is instantiated with the spec's ``[options]`` and
must offer ``reset(seed=...) -> (obs, info)`` and ``step(action) -> (obs, reward, terminated,
truncated, info)``. Everything else (pool, state injection, observations) is the gymnasium
driver's; there is no TimeLimit wrapper, so a spec cannot map a field to ``@elapsed_steps``.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

from envforge.backends.gymnasium import GymnasiumDriver
from envforge.backends.jax import load_module
from envforge.backends.library_files import library_files
from envforge.coverage.lines import PythonCoverage
from envforge.errors import BadInput
from envforge.spec import EnvSpec


def reference_class(target: str) -> type:
    """The class ``path/to/file.py:ClassName`` or ``pkg.module:ClassName`` names."""
    where, sep, class_name = target.rpartition(":")
    if not sep or not where:
        raise BadInput(
            f"expected 'path/to/file.py:ClassName' or 'pkg.module:ClassName', got {target!r}"
        )
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise BadInput(f"reference file not found: {path}")
        module: Any = load_module(path)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise BadInput(f"{target}: cannot import {where} ({e})") from None
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        raise BadInput(f"{where} has no class {class_name!r}")
    return cls


def class_file(cls: type) -> Path | None:
    source = inspect.getsourcefile(cls)
    return Path(source).resolve() if source else None


class PythonDriver(GymnasiumDriver):
    def __init__(self, spec: EnvSpec, target: str) -> None:
        self.cls = reference_class(target)
        path = class_file(self.cls)
        if path is None:
            raise BadInput(f"{target}: the class has no source file")
        self.path = path
        super().__init__(spec, env_id=target)

    def make_env(self) -> Any:
        try:
            return self.cls(**self.spec.options)
        except TypeError as e:
            raise BadInput(f"{self.env_id} rejects the spec's [options]: {e}") from None

    def time_limit_of(self, env: Any) -> Any:
        return None

    def _coverage_scope(self) -> PythonCoverage:
        """The whole reference file: a plain Python reference is the env and nothing else."""
        return PythonCoverage(self.path)

    def source_files(self) -> list[Path]:
        return [self.path, *library_files(self.spec)]

    def describe(self) -> str:
        return f"Python {self.path.name}:{self.cls.__name__}"
