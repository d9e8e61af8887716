"""Python backend: a reference class with gymnasium's API, driven like a gymnasium env.

The target is ``path/to/file.py:ClassName``. The class is instantiated with no arguments and
must offer ``reset(seed=...) -> (obs, info)`` and ``step(action) -> (obs, reward, terminated,
truncated, info)``. Everything else (pool, state injection, observations) is the gymnasium
driver's; there is no TimeLimit wrapper, so a spec cannot map a field to ``@elapsed_steps``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from envforge.backends.gymnasium import GymnasiumDriver
from envforge.backends.jax import load_module
from envforge.coverage.lines import PythonCoverage
from envforge.errors import BadInput
from envforge.spec import EnvSpec


class PythonDriver(GymnasiumDriver):
    def __init__(self, spec: EnvSpec, target: str) -> None:
        path, sep, class_name = target.rpartition(":")
        if not sep or not path.endswith(".py"):
            raise BadInput(f"expected 'path/to/file.py:ClassName', got {target!r}")
        self.path = Path(path)
        if not self.path.is_file():
            raise BadInput(f"reference file not found: {self.path}")
        cls = getattr(load_module(self.path), class_name, None)
        if not inspect.isclass(cls):
            raise BadInput(f"{self.path} has no class {class_name!r}")
        self.cls = cls
        super().__init__(spec, env_id=target)

    def make_env(self) -> Any:
        return self.cls(**self.spec.options)

    def time_limit_of(self, env: Any) -> Any:
        return None

    def _coverage_scope(self) -> PythonCoverage:
        """The whole reference file: a plain Python reference is the env and nothing else."""
        return PythonCoverage(self.path)

    def source_files(self) -> list[Path]:
        return [self.path.resolve()]

    def describe(self) -> str:
        return f"Python {self.path.name}:{self.cls.__name__}"
