"""Which objects of a reference hold its state and its generators, below the env object itself.

A reference often keeps its game in an object of its own (``env.game``), with the generator
further down (``env.game.np_random``, a ``random.Random`` in the dealer). The draw recorder
stands in for the generators wherever they are held, and ``init`` snapshots the numbers of
those objects under dotted paths, so neither needs a hand-written forwarder or property on the
env. The walk looks into plain Python objects (and lists of a few of them, as a list of
players) at most ``NESTED_DEPTH`` levels below the env, each object once; it never looks into
native objects (a Box2D world, a MuJoCo model, numpy) or dictionaries.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np

GENERATOR_TYPES = (np.random.Generator, np.random.RandomState, random.Random)
NESTED_DEPTH = 3
"""Plain objects the env holds (a game object, its round, its dealer) are looked into this many
levels deep."""
NESTED_ITEMS = 16
"""A list of plain objects (the players) is looked into item by item up to this many items."""
_NATIVE = frozenset(
    {"builtins", "numpy", "gymnasium", "Box2D", "mujoco", "pygame", "jax", "jaxlib", "torch"}
)
"""Packages whose objects are no game state to look into (a Box2D world, a renderer)."""
_BODY = ("position", "angle", "linearVelocity", "angularVelocity", "awake")


_NESTED_TYPES: dict[type, bool] = {}
"""Per type: whether its instances are looked into (a type decides it; walks run every step)."""
_LEAF_TYPES = frozenset({int, float, bool, str, bytes, complex, type(None), np.ndarray})


def is_nested(value: Any) -> bool:
    """A plain Python object holding state of its own (a game object a wrapper holds): not a
    number, array, generator, rigid body, class, function or native object."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return False
    known = _NESTED_TYPES.get(kind)
    if known is None:
        known = _NESTED_TYPES[kind] = _nested_type(kind)
    return known and isinstance(getattr(value, "__dict__", None), dict)


def _nested_type(kind: type) -> bool:
    if any("__call__" in vars(c) for c in kind.__mro__):
        return False  # functions, methods, classes and callable objects
    if issubclass(kind, (type, np.ndarray, np.generic, str, bytes, *GENERATOR_TYPES)):
        return False
    if all(hasattr(kind, m) for m in _BODY):
        return False
    return kind.__module__.split(".")[0] not in _NATIVE


def nested_list(value: Any) -> bool:
    """A short list of plain objects (the players of a game)."""
    return (
        type(value) in (list, tuple)
        and 0 < len(value) <= NESTED_ITEMS
        and all(is_nested(v) for v in value)
    )


_ENV: list[Any] = []


def inner_env(value: Any) -> Any:
    """The core of a gymnasium env held as an attribute (None if ``value`` is none)."""
    if type(value) in _LEAF_TYPES:
        return None
    if not _ENV:
        from gymnasium import Env

        _ENV.append(Env)
    return value.unwrapped if isinstance(value, _ENV[0]) else None


def generator_holders(root: Any) -> Iterator[tuple[Any, str]]:
    """``(object, attribute name)`` for every generator ``root`` holds, at any depth the walk
    reaches (``root.np_random``, ``root.game.np_random``, ``root.game.players[1].rng``)."""
    seen = {id(root)}
    todo: list[tuple[Any, int]] = [(root, 0)]
    while todo:
        obj, depth = todo.pop()
        for name, value in list(vars(obj).items()):
            if type(value) in _LEAF_TYPES:
                continue
            if isinstance(value, GENERATOR_TYPES):
                yield obj, name
                continue
            if depth >= NESTED_DEPTH:
                continue
            inner = inner_env(value)
            items = (
                [inner]
                if inner is not None
                else [value]
                if is_nested(value)
                else list(value)
                if nested_list(value)
                else []
            )
            for item in items:
                if id(item) not in seen:
                    seen.add(id(item))
                    todo.append((item, depth + 1))
