"""The port contract as typed code: what a port of each target provides, one ``Protocol`` each.

This module is the one source of truth for the contract. The drivers check a loaded port
against it (:func:`lacks`: ``backends/jax.py`` for a module, ``backends/rust.py`` for the
crate's ``EnvBatch``), and the translation prompts quote it (:func:`prompt_lines`, rendered into
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

    from envforge.rng.jax_draws import Draws

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
        """seed: a uint32 scalar"""

    def step(self, state: EnvState, action: jax.Array) -> tuple[EnvState, Obs, Reward, Flag, Flag]:
        """next state, obs, reward, terminated, truncated"""

    def observe(self, state: EnvState) -> Obs:
        """in the spec's shape and dtype"""

    def to_canonical(self, state: EnvState) -> Fields:
        """exactly the spec's fields"""

    def from_canonical(self, fields: Fields) -> EnvState:
        """one env's fields, traced jax arrays"""


class JaxPortWithDraws(JaxPort, Protocol):
    """A JAX port of a spec with ``[rng] step``: it also takes its random numbers from a
    ``Draws`` (``from envforge.kit import Draws``), the reference's tape under verification.
    Its ``step`` (training) draws from a ``jax.random`` key kept in its state as ``key`` (not
    canonical), which the verifier replaces to compare that step in distribution."""

    def step_with_draws(
        self, state: EnvState, action: jax.Array, draws: Draws
    ) -> tuple[EnvState, Obs, Reward, Flag, Flag, Draws]:
        """every random number asked of draws, in the reference's order"""


Mask: TypeAlias = "jax.Array"
Seat: TypeAlias = "jax.Array"


class JaxTurnBasedPort(JaxPort, Protocol):
    """A JAX port of several agents taking turns (a spec with ``[agents] turns =
    "sequential"``): ``step`` takes the current player's action, ``observe`` and ``step`` give
    every agent's observation (agent first), ``reward`` is the first agent's (each agent's is
    the spec's rewards field). ``envforge.kit.TurnBased`` gives all of it from a game's rules."""

    def legal_action_mask(self, state: EnvState) -> Mask:
        """bool[n_agents, n_actions]: each agent's legal actions now"""

    def current_player(self, state: EnvState) -> Seat:
        """int32 scalar: the seat (index into the spec's agents) that acts next"""


class RustEnvBatch(Protocol):
    """The class ``EnvBatch(num_envs, strict_float=False)`` of a Rust port's extension module:
    a batch of envs stepped in one call, writing into buffers the caller allocated."""

    def reset(self, seeds: NDArray[np.uint32]) -> None:
        """seeds uint32[n]: resize the batch to n, reset every env"""

    def step(
        self,
        actions: Column,
        obs: Column,
        reward: NDArray[np.float32],
        terminated: NDArray[np.bool_],
        truncated: NDArray[np.bool_],
    ) -> None:
        """actions int32[n] (discrete) or float32[n, *action_shape]; writes, never allocates:
        obs [n, *obs_shape] in the spec's dtype, reward float32[n], terminated and truncated
        bool[n]"""

    def observe(self, obs: Column) -> None:
        """writes the observations of the current envs into obs"""

    def get_state(self) -> dict[str, Column]:
        """the canonical fields by the spec's names, in its dtypes, one row per env"""

    def set_state(self, fields: dict[str, Column]) -> None:
        """resize the batch to the fields' n rows and load them"""

    @property
    def num_envs(self) -> int:
        """the batch size (a #[getter])"""


class RustEnvBatchExtras(Protocol):
    """What a Rust ``EnvBatch`` may add: ``reset_where`` (``envforge bench``'s auto-reset; the
    verifier never calls it) and, for a spec with ``[rng] step``, ``step_draws``."""

    def reset_where(self, done: NDArray[np.bool_], seeds: NDArray[np.uint32]) -> None:
        """optional (envforge bench's auto-reset): reset env i from seeds[i] where done[i]"""

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


def signature(protocol: type, name: str, annotated: bool = True) -> str:
    """``name(args) -> result`` as the port writes it (no ``self``), from the annotations
    (``annotated=False``: the arguments' names only, for a port in another language)."""
    member = inspect.getattr_static(protocol, name)
    if isinstance(member, property):
        assert member.fget is not None
        return f"{name} -> {inspect.signature(member.fget).return_annotation}"
    sig = inspect.signature(member)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    text = ", ".join(f"{p.name}: {p.annotation}" if annotated else p.name for p in params)
    return f"{name}({text}) -> {sig.return_annotation}"


def signatures(
    protocol: type, names: tuple[str, ...] | None = None, annotated: bool = True
) -> list[str]:
    """Each member as ``signature  # what it does`` (its docstring on one line), for prompts."""
    lines = []
    for name in names if names is not None else members(protocol):
        member = inspect.getattr_static(protocol, name)
        doc = inspect.getdoc(member.fget if isinstance(member, property) else member) or ""
        line = signature(protocol, name, annotated)
        lines.append(line + (f"  # {' '.join(doc.split())}" if doc else ""))
    return lines


PROTOCOLS: dict[str, type] = {
    p.__name__: p
    for p in (JaxPort, JaxPortWithDraws, JaxTurnBasedPort, RustEnvBatch, RustEnvBatchExtras)
}
"""The protocols by name, as the prompt templates ask for them."""


def prompt_lines(protocol: str, *names: str, annotated: bool = True) -> list[str]:
    """What a translation prompt quotes of ``protocol`` (all its members, or ``names``)."""
    return signatures(PROTOCOLS[protocol], names or None, annotated)


def prompt_doc(protocol: str) -> str:
    """The protocol's docstring as one paragraph, for a prompt."""
    return " ".join((inspect.getdoc(PROTOCOLS[protocol]) or "").split())


def lacks(where: str, implementation: object, protocol: type) -> str | None:
    """One line saying what ``implementation`` lacks of ``protocol``, with the signatures it
    needs; None when it has everything."""
    lacking = missing(implementation, protocol)
    if not lacking:
        return None
    needed = "; ".join(signature(protocol, name) for name in lacking)
    return f"{where} lacks {lacking} (envforge.kit.contract.{protocol.__name__}): define {needed}"
