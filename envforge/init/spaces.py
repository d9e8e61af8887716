"""Gymnasium spaces as ``[observation]`` and ``[action]`` tables, bounds included.

A Box, a Discrete and a Tuple of Discretes keep the one-array form the shipped specs use. A
Dict, any other Tuple, a MultiDiscrete and a MultiBinary become named parts
(``[observation.parts.<name>]``, ``spec/parts.py``), each with its space's shape, dtype and
bounds; a bound the same for every element is written once (a scalar the part broadcasts).
Spaces that are no fixed array (Text, Sequence, Graph) are refused in one line, or, inside a
Dict, left out with the reason (MiniGrid's ``mission`` string).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envforge.errors import BadInput
from envforge.spec.parts import PART_DTYPES

NOT_ARRAYS = {
    "Text": "a string",
    "Sequence": "a sequence of varying length",
    "Graph": "a graph of varying size",
    "OneOf": "one of several spaces",
}
"""Spaces whose values are no fixed-shape array, and what they are instead."""


def _name(space: Any) -> str:
    return type(space).__name__


def not_an_array(space: Any) -> str | None:
    """Why a space's values are no fixed-shape array (None when they are one)."""
    for cls in type(space).__mro__:  # gymnasium's own classes (a Tuple is also an abc Sequence)
        if cls.__module__.startswith("gymnasium.spaces") and cls.__name__ in NOT_ARRAYS:
            return f"a {_name(space)} space ({NOT_ARRAYS[cls.__name__]})"
    if _name(space) not in ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"):
        sample = space.sample()
        what = "a string" if isinstance(sample, str) else f"a {type(sample).__name__}"
        return f"a {_name(space)} space ({what}, not one of gymnasium's array spaces)"
    return None


def _bound(values: np.ndarray) -> float | list[float]:
    flat = np.asarray(values, dtype=np.float64).reshape(-1).tolist()
    return flat[0] if flat and len(set(flat)) == 1 else flat


def _dtype(space: Any) -> str:
    dtype = str(np.dtype(space.dtype))
    if dtype not in PART_DTYPES:
        raise BadInput(
            f"a {_name(space)} of {dtype}: the spec's dtypes are {', '.join(PART_DTYPES)}"
        )
    return dtype


def leaf_part(space: Any) -> dict[str, Any]:
    """One part's table (shape, dtype, low, high) for a space that is one array."""
    name = _name(space)
    if name == "Discrete":
        start = int(space.start)
        return {"shape": [], "dtype": _dtype(space), "low": start, "high": start + int(space.n) - 1}
    if name == "MultiDiscrete":
        first = np.asarray(space.start)
        return {
            "shape": list(space.shape),
            "dtype": _dtype(space),
            "low": _bound(first),
            "high": _bound(first + np.asarray(space.nvec) - 1),
        }
    if name == "MultiBinary":
        return {"shape": list(space.shape), "dtype": _dtype(space), "low": 0, "high": 1}
    if name == "Box":
        return {
            "shape": list(space.shape),
            "dtype": _dtype(space),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    raise BadInput(
        f"a {name} space: init drafts Box, Discrete, MultiDiscrete, MultiBinary, Dict and Tuple"
    )


def named_parts(
    space: Any, prefix: str = ""
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str]]]:
    """The parts of a nested space by path (``image``, ``0.pos``), and what was left out, why."""
    name = _name(space)
    why = not_an_array(space)
    if why is not None:
        return {}, [(prefix or "(observation)", f"{why}, no array")]
    items: list[tuple[str, Any]] = []
    if name == "Dict":
        items = [(str(k), v) for k, v in space.spaces.items()]
    elif name == "Tuple":
        items = [(str(i), v) for i, v in enumerate(space.spaces)]
    else:
        return {prefix: leaf_part(space)}, []
    parts: dict[str, dict[str, Any]] = {}
    left_out: list[tuple[str, str]] = []
    for key, sub in items:
        if "." in key or not key:
            raise BadInput(f"a {name} key {key!r}: part names are its keys, without dots")
        more, dropped = named_parts(sub, f"{prefix}.{key}" if prefix else key)
        parts.update(more)
        left_out += dropped
    return parts, left_out


def observation_table(
    space: Any, own_dtype: bool = True
) -> tuple[dict[str, Any], str, list[tuple[str, str]]]:
    """The ``[observation]`` table, its comment, and the parts left out (name, why).
    ``own_dtype=False`` drafts an integer Box as float32 (as the seats' draft takes it)."""
    name = _name(space)
    why = not_an_array(space)
    if why is not None:
        raise BadInput(
            f"the observation is {why}: envforge compares fixed-shape arrays; wrap the env so "
            "that it observes one (spec key wrappers)"
        )
    parts_space = getattr(space, "spaces", None)
    if name == "Tuple" and parts_space and all(_name(p) == "Discrete" for p in parts_space):
        low = [float(p.start) for p in parts_space]
        high = [lo + int(p.n) - 1 for lo, p in zip(low, parts_space, strict=True)]
        return (
            {"shape": [len(parts_space)], "dtype": "float32", "low": low, "high": high},
            f"{space}: a tuple of integers, compared as one float32 each",
            [],
        )
    if name == "Discrete":
        start = int(space.start)
        return (
            {"shape": [], "dtype": "float32", "low": start, "high": start + int(space.n) - 1},
            f"Discrete({space.n}): the observation is one integer, compared as a float32 scalar",
            [],
        )
    if name == "Box":
        table = leaf_part(space)
        note = f"gymnasium's observation_space bounds, written exactly ({space.dtype})"
        if not own_dtype and table["dtype"] not in ("float32", "float64"):
            table["dtype"] = "float32"
            note = (
                f"gymnasium's observation_space bounds (a {space.dtype} Box, compared as float32)"
            )
        return table, note, []
    parts, left_out = named_parts(space)
    if not parts:
        raise BadInput(f"the observation ({space}) has no part that is an array")
    note = (
        f"a {name} observation as named parts (a port returns them as a pytree of the same "
        "keys), bounds from gymnasium's observation_space"
    )
    return {"parts": parts}, note, left_out


def action_table(space: Any) -> dict[str, Any]:
    name = _name(space)
    if name == "Discrete":
        if int(space.start) != 0:
            raise BadInput(f"{space}: discrete actions start at 0 in a spec")
        return {"type": "discrete", "n": int(space.n)}
    if name == "Box":
        return {
            "type": "continuous",
            "shape": list(space.shape),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    raise BadInput(
        f"a {name} action space: specs take Discrete and Box actions (write a wrapper that "
        "maps a Discrete or Box action onto it, spec key wrappers)"
    )
