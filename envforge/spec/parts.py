"""Named parts: a nested value (a gymnasium Dict or Tuple observation, a JAX pytree) as named
arrays, each with its own shape, dtype and bounds, seen by the verifier as one flat row.

A part's name is its path in the nested value: ``image`` (a Dict key), ``0`` (a Tuple item),
``agent.pos`` (a key inside a key). :class:`PartLayout` flattens a batch of nested values into
``float64 [B, size]`` (every integer part up to 2**53 exactly, every float32 exactly), checks
each part's shape and kind as it goes, and names a flat element back by its part
(``obs.image[3,4,0]``). The verifier compares, bounds-checks and reports the flat row, so every
level handles a nested observation without knowing it is one; anything else with named parts
(one observation per agent) can reuse the same layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

PartDtype = Literal[
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
]
PART_DTYPES: tuple[str, ...] = get_args(PartDtype)
Bound = float | tuple[float, ...]
"""A scalar for every element of a part (broadcast), or one value per element (flattened)."""


class Part(BaseModel):
    """One named array of a nested value: ``[observation.parts.image]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: tuple[int, ...] = ()
    dtype: PartDtype
    low: Bound
    high: Bound

    @model_validator(mode="after")
    def _one_bound_per_element(self) -> Part:
        if any(size < 0 for size in self.shape) or len(self.shape) > 8:
            raise ValueError("a shape of at most 8 sizes, each >= 0")
        for key in ("low", "high"):
            value = getattr(self, key)
            if isinstance(value, tuple) and len(value) != self.size:
                raise ValueError(
                    f"{key}: a scalar or one value per element ({self.size} for shape "
                    f"{list(self.shape)}), got {len(value)}"
                )
        if np.any(self.bounds()[0] > self.bounds()[1]):
            raise ValueError("low <= high")
        return self

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Flat low and high, one per element (a scalar broadcast)."""
        low, high = (
            np.broadcast_to(np.asarray(b, dtype=np.float64).reshape(-1), (self.size,)).copy()
            for b in (self.low, self.high)
        )
        return low, high


def kind_of(dtype: np.dtype) -> str:
    """What a part's values are: ``float``, ``integer`` (signed or not) or ``bool``."""
    return {"f": "float", "b": "bool"}.get(np.dtype(dtype).kind, "integer")


class PartError(ValueError):
    """A nested value that does not fit the layout; ``part`` names where."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(f"{part}: {message}")
        self.part = part


@dataclass(frozen=True)
class PartLayout:
    """Where each named part sits in the flat row."""

    names: tuple[str, ...]
    parts: tuple[Part, ...]
    prefix: str = "obs"

    @staticmethod
    def of(parts: Mapping[str, Part], prefix: str = "obs") -> PartLayout:
        return PartLayout(tuple(parts), tuple(parts.values()), prefix)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    def offsets(self) -> list[int]:
        out, at = [], 0
        for p in self.parts:
            out.append(at)
            at += p.size
        return out

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lows, highs = zip(*(p.bounds() for p in self.parts), strict=True)
        return np.concatenate(lows), np.concatenate(highs)

    def flatten(self, value: Any, batch: int | None = None) -> np.ndarray:
        """``float64 [batch, size]`` from a nested value whose leaves are ``[batch, *shape]``
        (``batch=None``: one unbatched value, ``[size]``). Raises :class:`PartError` on a
        missing part, a wrong shape or a wrong kind (an integer part given floats)."""
        rows = 1 if batch is None else batch
        out = np.empty((rows, self.size), dtype=np.float64)
        for name, part, at in zip(self.names, self.parts, self.offsets(), strict=True):
            leaf = np.asarray(pick(value, name, self.prefix))
            leaf = leaf if batch is None or not leaf.ndim else leaf[:batch]  # padded rows off
            want = tuple(part.shape) if batch is None else (batch, *part.shape)
            if leaf.shape != want:
                raise PartError(
                    self.element(name), f"shape {list(leaf.shape)}, expected {list(want)}"
                )
            if kind_of(leaf.dtype) != kind_of(np.dtype(part.dtype)):
                raise PartError(
                    self.element(name),
                    f"dtype {leaf.dtype}, expected {part.dtype} ({kind_of(np.dtype(part.dtype))}s)",
                )
            out[:, at : at + part.size] = leaf.reshape(rows, part.size)
        return out[0] if batch is None else out

    def unflatten(self, flat: np.ndarray) -> dict[str, Any]:
        """The nested dict (``[B, size]`` rows or one ``[size]`` row) of each part in its dtype."""
        flat = np.asarray(flat)
        lead = flat.shape[:-1]
        out: dict[str, Any] = {}
        for name, part, at in zip(self.names, self.parts, self.offsets(), strict=True):
            leaf = flat[..., at : at + part.size].reshape(*lead, *part.shape).astype(part.dtype)
            node = out
            *path, last = name.split(".")
            for key in path:
                node = node.setdefault(key, {})
            node[last] = leaf
        return out

    def part_at(self, flat_index: int) -> tuple[str, Part, int]:
        """The part holding flat element ``flat_index``, and the index inside it."""
        for name, part, at in zip(self.names, self.parts, self.offsets(), strict=True):
            if flat_index < at + part.size:
                return name, part, flat_index - at
        raise IndexError(flat_index)

    def element(self, name: str, index: int | None = None) -> str:
        """``obs.image`` or, with the flat index inside the part, ``obs.image[3,4,0]``."""
        part = self.parts[self.names.index(name)] if name in self.names else None
        text = f"{self.prefix}.{name}"
        if index is None or part is None or not part.shape:
            return text
        where = np.unravel_index(index, part.shape)
        return text + "[" + ",".join(str(int(j)) for j in where) + "]"

    def element_name(self, flat_index: int) -> str:
        """The part and index of flat element ``flat_index``: ``obs.image[3,4,0]``."""
        name, _, inside = self.part_at(flat_index)
        return self.element(name, inside)


def pick(value: Any, name: str, prefix: str = "obs") -> Any:
    """The leaf at path ``name`` (``agent.pos``; ``0`` indexes a tuple) of a nested value."""
    node = value
    for key in name.split("."):
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif hasattr(node, "_asdict") and key in node._fields:  # a NamedTuple pytree
            node = getattr(node, key)
        elif isinstance(node, Sequence) and not isinstance(node, str) and key.isdigit():
            if int(key) >= len(node):
                raise PartError(f"{prefix}.{name}", f"no item {key} (a tuple of {len(node)})")
            node = node[int(key)]
        else:
            raise PartError(f"{prefix}.{name}", f"missing (no {key!r} in a {type(node).__name__})")
    return node
