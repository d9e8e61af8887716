"""The tables of ``env.toml`` as typed, frozen models: spaces, canonical state fields, RNG,
comparison, events, policies, C build settings and per-level verify settings.

``load.py`` puts them together into an :class:`~envforge.spec.EnvSpec` and loads and checks
files; this module is only their shape and the few helpers each table carries.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from envforge.spec import bounds
from envforge.spec.parts import Part, PartDtype, PartLayout

DTYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64", "uint8", "bool")
MAX_ELEMENTS = 1 << 20
"""Most elements one observation, action or state field may have (an Atari frame has 100,800):
every batch the verifier builds holds that many per env, so a larger shape is bad input."""
MAX_DIMENSIONS = 8


def _bounded_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if any(size < 0 for size in shape) or len(shape) > MAX_DIMENSIONS:
        raise ValueError(f"a shape of at most {MAX_DIMENSIONS} sizes, each >= 0")
    if math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"a shape of at most {MAX_ELEMENTS:,} elements, not {math.prod(shape):,}")
    return shape


Shape = Annotated[tuple[int, ...], AfterValidator(_bounded_shape)]


class FrozenModel(BaseModel):
    """Every table of env.toml: unknown keys are errors, a loaded spec never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BoxSpace(FrozenModel):
    shape: Shape
    dtype: PartDtype = "float32"
    low: float | list[float]
    high: float | list[float]
    attr: str | None = None
    """Stateful references without an observation method: the attribute that is the
    observation (FrozenLake's ``s``)."""
    parts: dict[str, Part] | None = None
    """A nested observation (gymnasium Dict/Tuple, a JAX pytree) as named parts; then shape,
    dtype and bounds are the flat row the verifier sees (``spec/parts.py``)."""

    @model_validator(mode="before")
    @classmethod
    def _flat_row_of_parts(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("parts") is None:
            return data
        raw = data["parts"]
        if not isinstance(raw, dict) or not raw:
            raise ValueError("parts: a table of named parts ([observation.parts.<name>])")
        layout = PartLayout.of(
            {k: v if isinstance(v, Part) else Part.model_validate(v) for k, v in raw.items()}
        )
        low, high = layout.bounds()
        flat = {
            "shape": (layout.size,),
            "dtype": "float64",
            "low": low.tolist(),
            "high": high.tolist(),
        }
        for key, value in flat.items():
            given = data.get(key)
            if (
                given is not None
                and np.shape(given) == np.shape(value)
                and np.all(np.asarray(given) == np.asarray(value))
            ):
                continue
            if given is not None:
                raise ValueError(f"with parts, {key} comes from the parts: leave it out")
        return {**data, **flat, "parts": dict(zip(layout.names, layout.parts, strict=True))}

    @property
    def layout(self) -> PartLayout | None:
        """The named parts' layout, or None for a plain array observation."""
        return None if self.parts is None else PartLayout.of(self.parts)

    def element_name(self, flat_index: int) -> str:
        """``obs.image[3,4,0]`` (parts) or ``obs[3]``: an observation element for a person."""
        layout = self.layout
        if layout is not None:
            return layout.element_name(flat_index)
        where = np.unravel_index(flat_index, self.shape) if self.shape else ()
        return "obs" + "".join(f"[{int(j)}]" for j in where)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low = np.broadcast_to(np.asarray(self.low, dtype=np.float64), self.shape)
        high = np.broadcast_to(np.asarray(self.high, dtype=np.float64), self.shape)
        return low, high


class ActionSpace(FrozenModel):
    type: Literal["discrete", "continuous"]
    n: int | None = None
    shape: Shape = ()
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


class StateField(FrozenModel):
    name: str
    dtype: Literal["float32", "float64", "int32", "int64", "uint32", "uint64", "uint8", "bool"]
    shape: Shape = ()
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
    shuffled: bool = False
    """A pile whose order nothing shows (a draw pile): its items (before ``pad``) are dealt as
    from a shuffled pile, so a training step may deal them lazily (a random card, not the top).
    Only the training-path check reads it: it shuffles the items before each sampled step, on
    both sides, and compares the field as a multiset. Needs a 1-D field with ``pad``."""

    labels: tuple[str, ...] = ()
    """Array fields: a name per element (flattened order), e.g. the joint each ``qvel[i]``
    belongs to; findings and error tables then say ``qvel[3] (bthigh)``."""
    per_agent: bool = False
    """Several agents: the field's first axis is the agent (one row per ``[agents] names``),
    and findings name the agent (``hand[player_1][3]``). The ``[agents]`` table's own fields
    (rewards, terminations, truncations, action mask) are per agent without saying so."""

    @model_validator(mode="after")
    def _shuffled_pile(self) -> StateField:
        if self.shuffled and (self.pad is None or len(self.shape) != 1):
            raise ValueError(f"{self.name}: shuffled needs a 1-D field with pad (a pile's items)")
        return self

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


class Agents(FrozenModel):
    """Several agents (docs/SPEC.md, several agents): who acts, and the state fields that hold
    each agent's part of a step. The observation's first axis is the agent; the action is the
    current player's (``sequential``) or one per agent (``simultaneous``, a joint action)."""

    names: tuple[str, ...] = Field(min_length=1)
    """The agents, in seat order (PettingZoo's ``possible_agents``)."""
    turns: Literal["sequential", "simultaneous"] = "sequential"
    current_player: str | None = "current_player"
    """Sequential: the int field holding the seat (index into ``names``) that acts next."""
    rewards: str = "rewards"
    """The float field ``[n_agents]``: each agent's reward from the last step."""
    terminations: str = "terminations"
    """The bool field ``[n_agents]``: agents that are done (left the game); the episode ends
    when every agent is done."""
    truncations: str = "truncations"
    """The bool field ``[n_agents]``: agents cut off (a move limit, an illegal move)."""
    action_mask: str | None = None
    """The bool field ``[n_agents, n_actions]``: each agent's legal actions (PettingZoo's
    ``observation["action_mask"]``), computed from the rest of the state."""
    illegal: Literal["terminate", "allowed"] = "allowed"
    """What an action outside the mask does on the reference: ``terminate`` ends the game for
    every agent (terminated and truncated) with ``illegal_reward`` to the agent that moved and
    0 to the others (PettingZoo's ``TerminateIllegalWrapper``); ``allowed`` steps it as any
    other action."""
    illegal_reward: float = -1.0
    zero_sum: bool = False
    """Every step's rewards sum to zero over the agents (but a step an illegal move ended
    under ``terminate``, which pays the mover alone): a property L1 checks on both sides."""

    @property
    def outputs(self) -> tuple[str, ...]:
        """Fields a step reports rather than reads: drawn states hold zeros there."""
        named = (self.rewards, self.terminations, self.truncations, self.action_mask)
        return tuple(n for n in named if n is not None)


class Rng(FrozenModel):
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


class Compare(FrozenModel):
    mode: Literal["exact", "tolerance"] = "exact"
    atol: float = 0.0
    rtol: float = 0.0
    strict_float: bool = False
    """Build/run both sides without FMA so float32 arithmetic agrees bit for bit."""


class Event(FrozenModel):
    name: str
    expr: str


class Policy(FrozenModel):
    name: str
    expr: str


class CoverageExclude(FrozenModel):
    """Reference lines that no verification of this configuration can run (another
    constructor option's branch, rendering, stepping after termination): left out of the
    coverage percentage and listed in the report with the reason."""

    match: str
    """A regular expression searched in the reference source (``^``/``$`` per line, may span
    lines): the line where each match starts is excluded, and the block it opens if it ends
    with ``:``."""
    why: str


class CSettings(FrozenModel):
    struct: str
    prefix: str
    sources: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()


Count = Annotated[int, bounds.field(bounds.AT_LEAST_ONE)]
Seconds = Annotated[float, bounds.field(bounds.SECONDS)]


class VerifySettings(FrozenModel):
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
    handlers: str | None = None
    """``file.py:function`` (relative to the spec): ``f(file, scope, text) -> list[str]``, the
    handlers (opcode handlers) a source line of the port or reference belongs to, for the
    handler-level localization of mutation campaigns (``envforge/mutate/handlers.py``)."""
    coverage_exclude: tuple[CoverageExclude, ...] = ()
