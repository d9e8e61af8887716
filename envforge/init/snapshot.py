"""The full attribute state of a stateful reference object, as comparable values.

Drafting a spec and explaining a failed self-check both ask the same question: which of the
object's attributes hold state? A snapshot turns every attribute of the unwrapped env (and the
counters of its gymnasium wrappers) into a plain value that can be compared with ``==``:
numbers and numeric arrays as numpy arrays, a numpy ``Generator`` as its bit generator's state,
anything else as a digest of its pickle (or its repr when it cannot be pickled).

A rigid body of a physics engine (a Box2D ``b2Body``, or anything with the same members) is no
single value: it is taken apart into the members that hold its motion, each under the path a
spec's ``attr`` uses for it (``lander.position``, ``lander.angle``, ``lander.linearVelocity``,
``lander.angularVelocity``, ``lander.awake``), plus the plain numbers a program stored on it
(``legs[0].ground_contact``). A list of bodies is taken apart item by item (``legs[0]...``);
a body reached a second time (LunarLander's ``drawlist`` holds the lander and legs again) is
left out, so each body has one path.
"""

from __future__ import annotations

import hashlib
import pickle
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from envforge.backends.attrs import ELAPSED_STEPS
from envforge.backends.gymnasium import core
from envforge.rng.recorder_reach import NESTED_DEPTH, inner_env, is_nested, nested_list

RNG = "rng"
NUMERIC = "numeric"
LIST = "list"
"""A Python list of numbers: its length may change (a hand of cards)."""
NONE = "none"
OTHER = "other"

BODY_MEMBERS = ("position", "angle", "linearVelocity", "angularVelocity", "awake")
"""What a rigid body's motion is, in the order a Driver writes it back (``awake`` last: putting
a body to sleep zeroes its velocities, and setting a velocity wakes it)."""


def is_body(value: Any) -> bool:
    """A physics engine's rigid body (Box2D's ``b2Body``): its class has the motion members."""
    return all(hasattr(type(value), m) for m in BODY_MEMBERS)


def body_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(is_body(v) for v in value)


def _body_values(path: str, body: Any, out: dict[str, Value]) -> None:
    for member in BODY_MEMBERS:
        got = getattr(body, member)
        if not isinstance(got, bool | int | float):
            got = tuple(got)  # a b2Vec2
        out[f"{path}.{member}"] = value_of(got)
    for name, got in vars(body).items():  # numbers a program keeps on the body
        if isinstance(got, bool | int | float | np.number | np.bool_):
            out[f"{path}.{name}"] = value_of(got)


def _seen(body: Any, bodies: list[Any]) -> bool:
    """``body`` was reached before (native proxies compare equal, not identical)."""
    if any(body == b for b in bodies):
        return True
    bodies.append(body)
    return False


@dataclass(frozen=True)
class Value:
    """One attribute's value in a snapshot: its kind and a comparable payload."""

    kind: str
    """``numeric`` or ``list`` (payload: ndarray), ``rng`` (bit generator state), ``none`` or ``other``."""
    payload: Any

    def same_as(self, other: Value) -> bool:
        if self.kind != other.kind:
            return False
        if self.kind in (NUMERIC, LIST):
            a, b = self.payload, other.payload
            return bool(a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b))
        return bool(self.payload == other.payload)

    def show(self) -> str:
        if self.kind in (NUMERIC, LIST):
            a = self.payload
            return repr(a.item()) if a.ndim == 0 else np.array2string(a, threshold=8)
        if self.kind == RNG:
            return "numpy Generator"
        return "None" if self.kind == NONE else f"<{self.payload[0]}>"


def _skipped(value: Any) -> bool:
    """Parts of an env that are never its state: spaces, its registry spec, code."""
    from gymnasium import Env, Space
    from gymnasium.envs.registration import EnvSpec as GymSpec

    return callable(value) or isinstance(value, Space | GymSpec | Env)


def value_of(value: Any, shallow: bool = False) -> Value:
    """``value`` as a comparable Value; ``shallow`` compares other objects by identity only
    (pickling Taxi's transition table after every step cost the probe 10 s)."""
    if value is None:
        return Value(NONE, None)
    if isinstance(value, np.random.Generator):
        return Value(RNG, repr(value.bit_generator.state))
    if isinstance(value, np.random.RandomState | random.Random):
        return Value(
            RNG, repr(value.get_state() if hasattr(value, "get_state") else value.getstate())
        )
    if isinstance(value, bool | int | float | np.number | np.bool_):
        return Value(NUMERIC, np.asarray(value))
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return Value(NUMERIC, value.copy())
    if isinstance(value, tuple | list) and all(
        isinstance(v, bool | int | float | np.number) for v in value
    ):
        # MountainCar keeps its state as a tuple, Blackjack its hands as lists
        return Value(LIST if isinstance(value, list) else NUMERIC, np.asarray(value))
    if shallow:
        return Value(OTHER, (type(value).__name__, f"id {id(value)}"))
    try:
        digest = hashlib.sha1(pickle.dumps(value, protocol=4)).hexdigest()
    except Exception:  # unpicklable objects (renderers, native handles): compare their repr
        digest = repr(value)
    return Value(OTHER, (type(value).__name__, digest))


def snapshot(env: Any, time_limit: Any = None, shallow: bool = False) -> dict[str, Value]:
    """Every state-like attribute of ``env``'s core object, plus the TimeLimit counter.

    Plain objects it holds (a game object, a list of players) are looked into: their
    attributes are snapshotted under dotted paths (``game.board``, ``game.players[0].hand``),
    as is the core of a gymnasium env it holds (``inner.unwrapped.state``). An object reached
    a second time (the dealer the game and its round share) is left out there."""
    out: dict[str, Value] = {}
    _snapshot_into(core(env), "", out, [], {id(core(env))}, 0, shallow)
    if time_limit is not None:
        out[ELAPSED_STEPS] = value_of(int(time_limit._elapsed_steps))
    return out


def _snapshot_into(
    obj: Any,
    prefix: str,
    out: dict[str, Value],
    bodies: list[Any],
    seen: set[int],
    depth: int,
    shallow: bool,
) -> None:
    for name, value in vars(obj).items():
        path = f"{prefix}{name}"
        if is_body(value):
            if not _seen(value, bodies):
                _body_values(path, value, out)
        elif body_list(value):
            for k, body in enumerate(value):
                if not _seen(body, bodies):
                    _body_values(f"{path}[{k}]", body, out)
        elif depth < NESTED_DEPTH and inner_env(value) is not None:
            inner = inner_env(value)
            if id(inner) not in seen:
                seen.add(id(inner))
                _snapshot_into(inner, f"{path}.unwrapped.", out, bodies, seen, depth + 1, shallow)
        elif depth < NESTED_DEPTH and is_nested(value):
            if id(value) not in seen:
                seen.add(id(value))
                _snapshot_into(value, f"{path}.", out, bodies, seen, depth + 1, shallow)
        elif depth < NESTED_DEPTH and nested_list(value):
            for k, item in enumerate(value):
                if id(item) not in seen:
                    seen.add(id(item))
                    _snapshot_into(item, f"{path}[{k}].", out, bodies, seen, depth + 1, shallow)
        elif not _skipped(value):
            out[path] = value_of(value, shallow)


def differing(a: dict[str, Value], b: dict[str, Value]) -> list[str]:
    """Attribute names whose values differ between two snapshots (or exist in only one)."""
    names = list(a) + [n for n in b if n not in a]
    return [n for n in names if n not in a or n not in b or not a[n].same_as(b[n])]
