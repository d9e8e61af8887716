"""The port contract as typed code: what a port of each target provides, one ``Protocol`` each.

This module is the one source of truth for the contract. The drivers check a loaded port
against it (:func:`missing`: ``backends/jax.py`` for a module, ``backends/rust.py`` for the
crate's ``EnvBatch``), and the translation prompts quote it (:func:`signatures`, rendered into
``prompts/translate_jax.j2`` and ``translate_rust.j2``): change a member here and both follow.

A JAX port is a module, so :class:`JaxPort`'s members are module-level functions (a module
satisfies a ``Protocol`` whose members it defines; ``self`` is not part of what a port writes).
The annotations are read as text, never evaluated: this module imports neither jax nor numpy.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    import jax
    import numpy as np
    from numpy.typing import NDArray

EnvState: TypeAlias = Any
"""The port's own state type (gymnax style: a ``NamedTuple`` of arrays)."""
Obs: TypeAlias = "jax.Array"
Reward: TypeAlias = "jax.Array"
Flag: TypeAlias = "jax.Array"
Fields: TypeAlias = "dict[str, jax.Array]"
Column: TypeAlias = "NDArray[Any]"


class JaxPort(Protocol):
    """One Python module with five pure functions over a single environment. The envforge
    backend vmaps and jits them; it never calls them on a batch itself."""

    def reset(self, seed: jax.Array) -> EnvState:
        """the env reset from a uint32 scalar seed"""

    def step(self, state: EnvState, action: jax.Array) -> tuple[EnvState, Obs, Reward, Flag, Flag]:
        """(next state, obs, reward, terminated, truncated); never resets a finished episode"""

    def observe(self, state: EnvState) -> Obs:
        """the observation, in the spec's shape and dtype"""

    def to_canonical(self, state: EnvState) -> Fields:
        """exactly the spec's fields, by the spec's names"""

    def from_canonical(self, fields: Fields) -> EnvState:
        """the state back from the spec's fields (traced jax arrays, one env)"""


class JaxPortWithDraws(JaxPort, Protocol):
    """A JAX port of a spec with ``[rng] step``: it also takes its random numbers from a
    ``Draws`` (``from envforge.kit import Draws``), the reference's tape under verification."""

    def step_with_draws(
        self, state: EnvState, action: jax.Array, draws: Any
    ) -> tuple[EnvState, Obs, Reward, Flag, Flag, Any]:
        """the step with every random number asked of draws, in the reference's order"""


class RustEnvBatch(Protocol):
    """The class ``EnvBatch(num_envs, strict_float=False)`` of a Rust port's extension module:
    a batch of envs stepped in one call, writing into buffers the caller allocated."""

    def reset(self, seeds: NDArray[np.uint32]) -> None:
        """resize the batch to n = len(seeds), reset every env"""

    def step(
        self,
        actions: Column,
        obs: Column,
        reward: NDArray[np.float32],
        terminated: NDArray[np.bool_],
        truncated: NDArray[np.bool_],
    ) -> None:
        """actions int32[n] or float32[n, *action_shape]; writes the other four in place"""

    def observe(self, obs: Column) -> None:
        """writes the observations of the current envs"""

    def get_state(self) -> dict[str, Column]:
        """the canonical fields, the spec's names and dtypes, one row per env"""

    def set_state(self, fields: dict[str, Column]) -> None:
        """resize the batch to the rows given and load them"""

    @property
    def num_envs(self) -> int:
        """the batch size (a getter)"""


class RustEnvBatchExtras(Protocol):
    """What a Rust ``EnvBatch`` may add: ``reset_where`` (``envforge bench``'s auto-reset; the
    verifier never calls it) and, for a spec with ``[rng] step``, ``step_draws``."""

    def reset_where(self, done: NDArray[np.bool_], seeds: NDArray[np.uint32]) -> None:
        """reset env i from seeds[i] where done[i]"""

    def step_draws(
        self,
        actions: Column,
        obs: Column,
        reward: NDArray[np.float32],
        terminated: NDArray[np.bool_],
        truncated: NDArray[np.bool_],
        log: dict[str, Column],
    ) -> list[str]:
        """the step with its draws from the tape in log, logged there (src/draws.rs)"""


def members(protocol: type) -> tuple[str, ...]:
    """The names ``protocol`` requires, in the order they are written (its bases' first)."""
    names: list[str] = []
    for cls in reversed(protocol.__mro__):
        if cls is object or cls is Protocol or not getattr(cls, "_is_protocol", False):
            continue
        for name, value in vars(cls).items():
            member = callable(value) or isinstance(value, property)
            if member and not name.startswith("_") and name not in names:
                names.append(name)
    return tuple(names)


def missing(implementation: object, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``implementation`` (a module, a class) lacks: a method
    must be callable, a property only present."""
    lacking = []
    for name in members(protocol):
        wanted = inspect.getattr_static(protocol, name)
        found = getattr(implementation, name, None)
        if found is None or (not isinstance(wanted, property) and not callable(found)):
            lacking.append(name)
    return lacking


def signature(protocol: type, name: str) -> str:
    """``name(args) -> result`` as the port writes it (no ``self``), from the annotations."""
    member = inspect.getattr_static(protocol, name)
    if isinstance(member, property):
        assert member.fget is not None
        return f"{name} -> {inspect.signature(member.fget).return_annotation}"
    sig = inspect.signature(member)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    text = ", ".join(f"{p.name}: {p.annotation}" for p in params)
    return f"{name}({text}) -> {sig.return_annotation}"


def signatures(protocol: type, names: tuple[str, ...] | None = None) -> list[str]:
    """Each member as ``signature  # what it does`` (its docstring), for prompts and errors."""
    lines = []
    for name in names if names is not None else members(protocol):
        member = inspect.getattr_static(protocol, name)
        doc = inspect.getdoc(member.fget if isinstance(member, property) else member) or ""
        lines.append(f"{signature(protocol, name)}" + (f"  # {doc}" if doc else ""))
    return lines


def lacks(where: str, implementation: object, protocol: type) -> str | None:
    """One line saying what ``implementation`` lacks of ``protocol``, with the signatures it
    needs; None when it has everything."""
    lacking = missing(implementation, protocol)
    if not lacking:
        return None
    needed = "; ".join(signature(protocol, name) for name in lacking)
    return f"{where} lacks {lacking} (envforge.kit.contract.{protocol.__name__}): define {needed}"
