"""EnvSpec: load and validate ``references/<env>/env.toml``.

The spec is the single description both sides of a comparison share: spaces, canonical state
fields, RNG mode, comparison tolerances, named events and per-level settings. A malformed spec
raises :class:`SpecError` naming the file, the key and what was expected.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from envforge import bounds
from envforge.errors import SpecError
from envforge.expr import ExprError, Expression

DTYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64", "uint8", "bool")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BoxSpace(_Model):
    shape: tuple[int, ...]
    dtype: Literal["float32", "float64"] = "float32"
    low: float | list[float]
    high: float | list[float]
    attr: str | None = None
    """Stateful references without an observation method: the attribute that is the
    observation (FrozenLake's ``s``)."""

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low = np.broadcast_to(np.asarray(self.low, dtype=np.float64), self.shape)
        high = np.broadcast_to(np.asarray(self.high, dtype=np.float64), self.shape)
        return low, high


class ActionSpace(_Model):
    type: Literal["discrete", "continuous"]
    n: int | None = None
    shape: tuple[int, ...] = ()
    low: float | list[float] | None = None
    high: float | list[float] | None = None

    @model_validator(mode="after")
    def _check(self) -> ActionSpace:
        if self.type == "discrete" and (self.n is None or self.n < 1):
            raise ValueError("discrete actions need n >= 1")
        if self.type == "continuous" and (self.low is None or self.high is None):
            raise ValueError("continuous actions need low and high")
        return self

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int32) if self.type == "discrete" else np.dtype(np.float32)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low = np.broadcast_to(np.asarray(self.low, dtype=np.float32), self.shape)
        high = np.broadcast_to(np.asarray(self.high, dtype=np.float32), self.shape)
        return low, high

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` uniform random actions: int32 indices, or float32 vectors within the bounds."""
        if self.type == "discrete":
            assert self.n is not None
            return rng.integers(0, self.n, size=n).astype(np.int32)
        low, high = self.bounds()
        return rng.uniform(low, high, size=(n, *self.shape)).astype(np.float32)


PerElement = float | tuple[float, ...]
"""A scalar for the whole field, or one value per element of an array field (flattened order)."""


class StateField(_Model):
    name: str
    dtype: Literal["float32", "float64", "int32", "int64", "uint32", "uint64", "uint8", "bool"]
    shape: tuple[int, ...] = ()
    low: PerElement | None = None
    high: PerElement | None = None
    """Valid range; for an array field a list gives each element its own (joint limits)."""
    attr: str | None = None
    """Where the field lives on a stateful reference (gymnasium/Python), e.g. ``state[0]``;
    for a JavaScript reference a path with one ``[*]`` per dimension (``sides[*].hp``)."""
    c_field: str | None = None
    """Struct member in a C reference, when its name differs."""
    aliases: tuple[str, ...] = ()
    """Other names the sources use for this field (used by localization)."""
    atol: PerElement | None = None
    rtol: PerElement | None = None
    period: float | None = None
    """Angles: values that differ by whole periods are the same (tolerance mode only)."""
    pad: float | None = None
    """A variable-length list on the reference (a hand of cards) as a fixed array: its elements
    first, then this sentinel up to the field's shape (the list's length is where it starts)."""

    labels: tuple[str, ...] = ()
    """Array fields: a name per element (flattened order), e.g. the joint each ``qvel[i]``
    belongs to; findings and error tables then say ``qvel[3] (bthigh)``."""

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def per_element(self, value: PerElement | None, default: float) -> float | np.ndarray:
        """``value`` as a scalar, or as an array of the field's shape when given per element."""
        if value is None:
            return default
        if isinstance(value, tuple):
            return np.asarray(value, dtype=np.float64).reshape(self.shape)
        return float(value)

    def limits(self, default_low: float, default_high: float) -> tuple[Any, Any]:
        """(low, high): scalars, or arrays of the field's shape for per-element ranges."""
        return self.per_element(self.low, default_low), self.per_element(self.high, default_high)

    def element_name(self, flat_index: int) -> str:
        """``qvel[3] (bthigh)``: an element by its index in the field's shape, and its label."""
        index = np.unravel_index(flat_index, self.shape) if self.shape else ()
        name = self.name + "".join(f"[{int(j)}]" for j in index)
        return f"{name} ({self.labels[flat_index]})" if self.labels else name


class Rng(_Model):
    mode: Literal["replicate", "sync"]
    step: Literal["none", "tape", "distribution"] = "none"
    """Randomness inside ``step``: none; ``tape`` (the reference's draws are recorded and
    replayed to the port, compared exactly); ``distribution`` (two-sample tests from fixed
    states). See docs/SPEC.md."""
    tape_size: int = Field(default=16, ge=1, le=4096)
    """Most draws one step may make (the length of the tape handed to a port)."""
    samples: int = Field(default=2000, ge=50)
    """Distribution checks: samples per side from each tested state and action."""
    states: int = Field(default=12, ge=1)
    """Distribution checks: how many (state, action) pairs are tested."""


class Compare(_Model):
    mode: Literal["exact", "tolerance"] = "exact"
    atol: float = 0.0
    rtol: float = 0.0
    strict_float: bool = False
    """Build/run both sides without FMA so float32 arithmetic agrees bit for bit."""


class Event(_Model):
    name: str
    expr: str


class Policy(_Model):
    name: str
    expr: str


class CoverageExclude(_Model):
    """Reference lines that no verification of this configuration can run (another
    constructor option's branch, rendering, stepping after termination): left out of the
    coverage percentage and listed in the report with the reason."""

    match: str
    """A regular expression searched in the reference source (``^``/``$`` per line, may span
    lines): the line where each match starts is excluded, and the block it opens if it ends
    with ``:``."""
    why: str


class CSettings(_Model):
    struct: str
    prefix: str
    sources: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()


Count = Annotated[int, bounds.field(bounds.AT_LEAST_ONE)]
Seconds = Annotated[float, bounds.field(bounds.SECONDS)]


class VerifySettings(_Model):
    l1_examples: Count = 150
    l1_batch: Count = 64
    l1_sweep: Count = 4096
    reset_samples: Count = 2000
    seed_sweep: Annotated[int, bounds.field(bounds.SEED_SWEEP)] = 1 << 32
    seed_sweep_seconds: Seconds = 15.0
    alpha: Annotated[float, bounds.field(bounds.PROBABILITY)] = 0.001
    l2_examples: Count = 40
    l2_steps: Count = 30
    l3_episodes: Count = 100
    l3_max_steps: Annotated[int | None, bounds.field(bounds.AT_LEAST_ONE)] = None
    timeout_s: Seconds = 120.0
    constrain: str | None = None
    """``file.py:function`` (relative to the spec): maps every batch of drawn states (a dict of
    ``[B, ...]`` arrays) to valid ones, e.g. a program counter snapped onto an instruction."""
    explain: str | None = None
    """``file.py:function`` (relative to the spec): ``f(state_before, action, keys) -> str``,
    text added to a step finding (e.g. which opcode handler wrote the diverging field)."""
    coverage_exclude: tuple[CoverageExclude, ...] = ()


class EnvSpec(_Model):
    name: str
    reference: str
    description: str = ""
    sources: tuple[str, ...] = ()
    """Other files of the reference (relative to the spec), shown in the translation prompt
    after it and copied beside it into an agent's workspace: modules it loads by path, data it
    reads (a game ROM's assembly source)."""
    episode_cap: int = Field(gt=0)
    observation: BoxSpace
    action: ActionSpace
    state: tuple[StateField, ...]
    rng: Rng
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
    def reference_kind(self) -> str:
        return reference_kind(self.reference)

    def reference_path(self) -> Path | None:
        """Path of the reference source on disk (None for registry ids like gymnasium:...)."""
        kind = self.reference_kind
        if kind == "gymnasium":
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


def reference_kind(reference: str) -> str:
    if reference.startswith("gymnasium:"):
        return "gymnasium"
    if reference.endswith(".c"):
        return "c"
    if ".py:" in reference:
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
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(
            p, "(file)", f"a readable UTF-8 text file ({e.__class__.__name__})"
        ) from None
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
            "a .c file, 'gymnasium:<id>', 'file.py:Class' or 'node:file.js'",
            spec.reference,
        )
    if kind == "c" and spec.c is None:
        raise SpecError(p, "c", "a [c] table with struct and prefix for a C reference")
    if kind in ("gymnasium", "python", "node"):
        for i, f in enumerate(spec.state):
            if f.attr is None:
                raise SpecError(p, f"state[{i}].attr", "an attribute mapping for this reference")
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
            raise SpecError(p, key, f"a valid expression ({e})") from None
    if spec.valid is not None:
        try:
            _state_expression(spec.valid, tuple(spec.field_names))
        except ExprError as e:
            raise SpecError(p, "valid", f"a valid expression over the state fields ({e})") from None
