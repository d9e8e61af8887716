"""The target registry: what each port language ("target") is, in one place.

A :class:`Target` says how a port of that language is recognised in a folder, which driver
runs it, which prompt template writes it, what to check before a translation, what to build
on the host and in the sandbox, which job benchmarks it and how ``envforge.make`` wraps it.
Every command, ``envforge list`` and ``envforge bench`` read it; no other module tests a
target's name (``tests/house/test_architecture.py`` keeps it so).

The registry is the lowest layer of the package: it imports nothing of envforge but the
errors. The code a target names (driver, preflight, bench job, ...) is written as
``"module:attribute"`` and imported when it is used (:func:`load`), so that the drivers,
commands and benchmarks that read the registry do not import each other through it.

To add a target: a module here defining one ``Target`` (``jax.py``, ``rust.py``, ``c.py``),
its name in ``BUILTIN``, and the new driver, prompt template and bench job it names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Target:
    name: str
    """What ``--target`` takes, and the folder ``generated/<env>/<name>`` a port lives in."""
    title: str
    """The language as prompts and messages name it: "JAX", "Rust", "C"."""
    recognise: Callable[[Path], bool]
    """Whether a path (folder or file) holds a port of this target."""
    driver: str
    """``module:Class`` built as ``Class(spec, path, strict_float=...)`` (or without
    ``strict_float`` when ``driver_strict`` is False)."""
    prompt_template: str
    """The translation prompt's template in ``envforge/prompts/templates``."""
    code_lang: str
    """Fence language of the port's code in prompts."""
    workspace_port: str
    """What an agent is told to write, relative to its workspace (``{env}``: the env name)."""
    workspace_main: str
    """The file repair prompts show, relative to the workspace."""
    driver_strict: bool = True
    preflight: str | None = None
    """``module:function()`` raising BadInput when a tool the target needs is missing."""
    host_prepare: str | None = None
    """``module:function(path)`` run on the host before a sandboxed build (network allowed)."""
    compile_step: str | None = None
    """``module:function(path)`` run first in the driver server, under the build limit."""
    strict_env: dict[str, str] = field(default_factory=dict)
    """Environment of a strict-float run of the port (flags of its compiler or runtime)."""
    bench_job: str | None = None
    """``module:function(spec, path, settings, label)`` timing the port (``envforge bench``)."""
    make_batch: str | None = None
    """``module:function(spec, path, num_envs, strict_float)``: the batch ``envforge.make``
    wraps; None when make does not support the target."""
    default_api: str = "gymnasium"
    """``envforge.make``'s API when neither ``api`` nor ``num_envs`` is given."""
    python_module: bool = False
    """The port is a Python module (loaded by name: trained in-process, mutated as one file)."""
    source_globs: tuple[str, ...] = ()
    """The port's own source files inside its folder (mutation, prompts), when not a module."""
    tape_kit: bool = False
    """An agent writing this target gets envforge's draw interface for tape/distribution specs."""
    profile: str | None = None
    """``module:function(spec, port, batch, sandbox) -> dict``: ``envforge profile``'s job."""
    profile_render: str | None = None
    """``module:function(profile, console, top)``: how ``envforge profile`` prints it."""

    def load_code(self, attribute: str) -> Any:
        """The code one of the ``module:attribute`` fields names (None when unset)."""
        ref = getattr(self, attribute)
        return None if ref is None else load_ref(ref)

    def folder(self, env: str) -> str:
        return f"generated/{env}/{self.name}"


def load_ref(ref: str) -> Any:
    """The attribute a ``module:attribute`` reference names, imported now."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)
