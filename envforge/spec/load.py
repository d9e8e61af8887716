"""EnvSpec: load and validate ``references/<env>/env.toml``.

The spec is the single description both sides of a comparison share: spaces, canonical state
fields, RNG mode, comparison tolerances, named events and per-level settings (each table's
model is in ``tables.py``). A malformed spec raises :class:`SpecError` naming the file,
the key and what was expected.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field, ValidationError

from envforge.errors import SpecError
from envforge.spec import bounds
from envforge.spec.expr import ExprError, Expression
from envforge.spec.seats import check_agents
from envforge.spec.tables import (
    ActionSpace,
    Agents,
    BoxSpace,
    Compare,
    CSettings,
    Event,
    FrozenModel,
    Policy,
    Rng,
    StateField,
    VerifySettings,
)
from envforge.untrusted.input_files import TOML_BYTES, InputFileError, load_toml, read_text

MODULE_NAME = r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$"
"""A dotted Python module name (``rlcard.games.uno.round``)."""


class EnvSpec(FrozenModel):
    name: str
    reference: str
    description: str = ""
    sources: tuple[str, ...] = ()
    """Other files of the reference (relative to the spec), shown in the translation prompt
    after it and copied beside it into an agent's workspace: modules it loads by path, data it
    reads (a game ROM's assembly source)."""
    library_modules: tuple[Annotated[str, Field(pattern=MODULE_NAME)], ...] = ()
    """Installed Python modules whose code holds the rules the reference runs (rlcard's UNO
    game for a reference that wraps it): quoted after the sources and copied, for reading,
    into an agent's workspace under ``reference/library/``."""
    episode_cap: int = Field(gt=0)
    observation: BoxSpace
    action: ActionSpace
    state: tuple[StateField, ...]
    rng: Rng
    agents: Agents | None = None
    """Several agents: who acts and which fields hold each agent's reward, flags and mask
    (None: one agent, the usual case)."""
    compare: Compare = Compare()
    termination: str | None = None
    valid: str | None = None
    """A predicate over the state fields (by name) that holds for every state the reference can
    be in: L1 and the mutation differential draw only states that satisfy it."""
    event: tuple[Event, ...] = ()
    policy: tuple[Policy, ...] = ()
    c: CSettings | None = None
    verify: VerifySettings = VerifySettings()
    l4: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the reference's constructor (``gymnasium.make(id, **options)``),
    e.g. ``{map_name = "8x8", is_slippery = true}``."""
    port: dict[str, str] = Field(default_factory=dict)
    """Default port per target, relative to the repository root, e.g. {jax = "generated/pong/jax"}."""
    root: Path = Path(".")

    # ---- derived helpers -------------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.state]

    def field(self, name: str) -> StateField:
        for f in self.state:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def seat_fields(self) -> tuple[str, ...]:
        """Fields whose first axis is the agent: the ``[agents]`` table's and ``per_agent`` ones."""
        if self.agents is None:
            return ()
        named = (*self.agents.outputs, *(f.name for f in self.state if f.per_agent))
        return tuple(dict.fromkeys(named))

    def element_name(self, key: str, index: tuple[int, ...]) -> str:
        """``obs[player_1][3]``, ``rewards[player_0]``, ``qvel[3] (bthigh)``: an element of a
        field or of the observation, its agent named where its first axis is the agent."""
        layout = self.observation.layout
        if key == "obs" and layout is not None and index:
            # obs.image[3,4,0] or, one part per agent, obs.player_1[5,3,0]: the part's element
            return layout.element_name(int(index[0]))
        parts = [f"[{int(j)}]" for j in index]
        if self.agents is not None and index and (key == "obs" or key in self.seat_fields):
            parts[0] = f"[{self.agents.names[int(index[0])]}]"
        name = key + "".join(parts)
        if key in self.field_names and self.field(key).labels:
            f = self.field(key)
            name += f" ({f.labels[int(np.ravel_multi_index(index, f.shape))]})"
        return name

    def agents_named(self, key: str, index: tuple[int, ...]) -> str | None:
        """The agent an element of ``key`` belongs to (None: not an agent's part)."""
        if self.agents is None or not index or (key != "obs" and key not in self.seat_fields):
            return None
        layout = self.observation.layout
        if key == "obs" and layout is not None:  # the part's first name is its agent's
            return layout.part_at(int(index[0]))[0].split(".", 1)[0]
        return self.agents.names[int(index[0])]

    def observation_agents(self, differs: np.ndarray) -> np.ndarray:
        """bool ``[n_agents]``: whose observation holds an element of ``differs`` (one env's
        observation-shaped mask): by the first axis, or by the parts named by agent."""
        assert self.agents is not None
        names = list(self.agents.names)
        layout = self.observation.layout
        if layout is None:
            return np.asarray(np.asarray(differs).reshape(len(names), -1).any(axis=1))
        out = np.zeros(len(names), dtype=bool)
        flat = np.asarray(differs).reshape(-1)
        for name, part, at in zip(layout.names, layout.parts, layout.offsets(), strict=True):
            out[names.index(name.split(".", 1)[0])] |= bool(flat[at : at + part.size].any())
        return out

    @property
    def reference_kind(self) -> str:
        return reference_kind(self.reference)

    @property
    def reference_module(self) -> str | None:
        """The installed module of a ``pkg.module:Class`` reference (None for any other)."""
        return installed_class_module(self.reference)

    @property
    def class_name(self) -> str:
        """The class of a Python reference (``file.py:Class`` or ``pkg.module:Class``)."""
        return self.reference.rsplit(":", 1)[1]

    def reference_path(self) -> Path | None:
        """Path of the reference source on disk (None for registry ids like gymnasium:... and
        for a class of an installed module, which is imported by name)."""
        kind = self.reference_kind
        if kind in ("gymnasium", "pettingzoo") or self.reference_module is not None:
            return None
        target = self.reference.split(":", 1)[0] if kind == "python" else self.reference
        if kind == "node":
            target = target.removeprefix("node:")
        p = Path(target)
        return p if p.is_absolute() else self.root / p

    def tolerance(self, field: str | None) -> tuple[Any, Any]:
        """(atol, rtol) of a field (or of observation and reward, for None): floats, or
        arrays of the field's shape where the spec gives them per element."""
        if self.compare.mode == "exact":
            return 0.0, 0.0
        if field is not None:
            f = self.field(field)
            return f.per_element(f.atol, self.compare.atol), f.per_element(
                f.rtol, self.compare.rtol
            )
        return self.compare.atol, self.compare.rtol

    def expression(self, source: str) -> Expression:
        """An expression over a transition: before/after state, action, reward, flags, obs."""
        return _transition_expression(source, tuple(self.field_names))

    def policy_expression(self, source: str) -> Expression:
        return _policy_expression(source)

    def valid_mask(self, state: Mapping[str, np.ndarray]) -> np.ndarray:
        """Which rows of a batched ``state`` satisfy ``valid`` (all of them without one)."""
        n = len(next(iter(state.values())))
        if self.valid is None:
            return np.ones(n, dtype=bool)
        mask = _state_expression(self.valid, tuple(self.field_names))(**state)
        return np.broadcast_to(np.asarray(mask, dtype=bool), (n,))


# Levels evaluate events, termination and policies every step: parse and validate each once.
@lru_cache(maxsize=256)
def _transition_expression(source: str, fields: tuple[str, ...]) -> Expression:
    names = set(fields)
    return Expression(
        source,
        {
            "before": names,
            "after": names,
            "action": None,
            "reward": None,
            "terminated": None,
            "truncated": None,
            "obs": None,
        },
    )


@lru_cache(maxsize=64)
def _state_expression(source: str, fields: tuple[str, ...]) -> Expression:
    return Expression(source, dict.fromkeys(fields))


@lru_cache(maxsize=256)
def _policy_expression(source: str) -> Expression:
    return Expression(source, {"obs": None, "t": None})


INSTALLED_CLASS = r"^(?P<module>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*):[A-Za-z_]\w*$"
"""``pkg.module:Class``: a class of an installed module, imported by name."""


def installed_class_module(reference: str) -> str | None:
    """``pkg.module`` of a ``pkg.module:Class`` reference, or None."""
    if reference.startswith(("gymnasium:", "node:", "pettingzoo:")):
        return None
    found = re.match(INSTALLED_CLASS, reference)
    if found is None or found.group("module").endswith(".py"):  # file.py:Class is a file
        return None
    return found.group("module")


def reference_kind(reference: str) -> str:
    if reference.startswith("gymnasium:"):
        return "gymnasium"
    if reference.startswith("pettingzoo:"):
        return "pettingzoo"
    if reference.endswith(".c"):
        return "c"
    if ".py:" in reference or installed_class_module(reference) is not None:
        return "python"
    if reference.endswith(".js"):  # "node:file.js" or "file.js"
        return "node"
    return "unknown"


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + p
    return out or "(top level)"


def load_spec(path: str | Path) -> EnvSpec:
    """Load ``env.toml`` (or a directory holding one) into a validated EnvSpec."""
    p = Path(path)
    if p.is_dir():
        p = p / "env.toml"
    if not p.is_file():
        raise SpecError(p, "(file)", "an existing env.toml")
    try:
        raw = load_toml(p, "spec")
    except InputFileError as e:
        raise SpecError(p, "(file)", f"a readable regular UTF-8 text file ({e.reason})") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(p, "(syntax)", f"valid TOML ({e})") from None
    raw["root"] = p.parent.resolve()
    try:
        spec = EnvSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        key = _loc(tuple(err["loc"]))
        msg = err["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
        if err["type"] == "extra_forbidden":
            msg = "no such key (check spelling)"
        elif err["type"] == "missing":
            msg = "this key to be present"
        raise SpecError(
            p, key, msg, None if err["type"] == "missing" else err.get("input")
        ) from None
    _check_semantics(p, spec)
    return spec


def with_reference(spec: EnvSpec, reference: str) -> EnvSpec:
    """The spec with another reference (``--ref`` beside ``--spec``), checked like a loaded one."""
    changed = spec.model_copy(update={"reference": reference})
    _check_semantics(spec.root / "env.toml", changed)
    return changed


def _check_semantics(p: Path, spec: EnvSpec) -> None:
    if bounds.control_character(spec.name) or "/" in spec.name or spec.name in ("", ".", ".."):
        raise SpecError(p, "name", "a name without control characters or '/'", spec.name)
    seen: set[str] = set()
    for i, f in enumerate(spec.state):
        if f.name in seen:
            raise SpecError(p, f"state[{i}].name", "a unique field name", f.name)
        seen.add(f.name)
        for key in ("low", "high", "atol", "rtol", "labels"):
            value = getattr(f, key)
            if isinstance(value, tuple) and (value or key != "labels") and len(value) != f.size:
                raise SpecError(
                    p,
                    f"state[{i}].{key}",
                    f"one value per element ({f.size} for shape {list(f.shape)})",
                    list(value),
                )
        low, high = f.limits(-np.inf, np.inf)
        if np.any(np.asarray(low) > np.asarray(high)):
            raise SpecError(p, f"state[{i}].low", "low <= high", f.low)
    if not spec.state:
        raise SpecError(p, "state", "at least one canonical state field")
    kind = spec.reference_kind
    if kind == "unknown":
        raise SpecError(
            p,
            "reference",
            "a .c file, 'gymnasium:<id>', 'gymnasium:<module>:<id>', 'pettingzoo:<module>', "
            "'file.py:Class', 'pkg.module:Class' or 'node:file.js'",
            spec.reference,
        )
    if kind == "c" and spec.c is None:
        raise SpecError(p, "c", "a [c] table with struct and prefix for a C reference")
    if kind in ("gymnasium", "python", "node"):
        for i, f in enumerate(spec.state):
            if f.attr is None:
                raise SpecError(p, f"state[{i}].attr", "an attribute mapping for this reference")
    if kind == "pettingzoo":
        if spec.agents is None:
            raise SpecError(p, "agents", "an [agents] table for a PettingZoo reference")
        for i, f in enumerate(spec.state):
            if f.attr is None and f.name not in (*spec.agents.outputs, spec.agents.current_player):
                raise SpecError(p, f"state[{i}].attr", "an attribute mapping for this reference")
    if spec.agents is not None:
        check_agents(p, spec, spec.agents)
    exprs: list[tuple[str, str, bool]] = [
        (f"event[{i}].expr", e.expr, False) for i, e in enumerate(spec.event)
    ]
    exprs += [(f"policy[{i}].expr", pol.expr, True) for i, pol in enumerate(spec.policy)]
    if spec.termination is not None:
        exprs.append(("termination", spec.termination, False))
    for key, source, is_policy in exprs:
        try:
            spec.policy_expression(source) if is_policy else spec.expression(source)
        except ExprError as e:
            raise SpecError(_line_of(p, source), key, f"a valid expression ({e})") from None
    if spec.valid is not None:
        try:
            _state_expression(spec.valid, tuple(spec.field_names))
        except ExprError as e:
            where = _line_of(p, spec.valid)
            raise SpecError(
                where, "valid", f"a valid expression over the state fields ({e})"
            ) from None


def _line_of(p: Path, source: str) -> str:
    """``env.toml:12``: the file and the line where the expression ``source`` starts (the file
    alone when its text cannot be found there, e.g. written with escapes)."""
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    try:
        lines = read_text(p, "spec", TOML_BYTES).splitlines()
    except InputFileError:
        return str(p)
    found = [n for n, line in enumerate(lines, 1) if first and first in line]
    return f"{p}:{found[0]}" if found else str(p)
