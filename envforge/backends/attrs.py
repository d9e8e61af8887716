"""Canonical state fields <-> attributes of a stateful reference object.

A spec maps each canonical field onto the reference with its ``attr``:

- ``name``            the attribute ``env.name`` holds the field's value (any shape);
- ``name[i]``         element ``i`` of the array attribute ``env.name``;
- ``a.b``             an attribute of an attribute (MuJoCo envs keep their state in
                      ``env.data.qpos``); ``a.b[i]`` likewise;
- ``@elapsed_steps``  the step counter of gymnasium's ``TimeLimit`` wrapper.

A field with ``pad`` is a variable-length Python list on the reference (a hand of cards): the
canonical array holds its elements, then the sentinel ``pad`` up to the field's shape; written
back, the list ends at the first sentinel.

Writing an indexed attribute rebuilds the whole array with the canonical dtype of the fields
that live in it, so the reference steps from exactly that dtype (MountainCarContinuous, for
one, computes in float32 when its state is float32 and in float64 when it is float64).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from envforge.backends.base import State
from envforge.errors import BadInput
from envforge.spec import EnvSpec
from envforge.spec_sections import StateField

ELAPSED_STEPS = "@elapsed_steps"
_ATTR = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\[(\d+)\])?$")


def _owner(obj: Any, path: str) -> tuple[Any, str]:
    """The object that holds the last attribute of a dotted ``path``, and that attribute."""
    *parents, last = path.split(".")
    for name in parents:
        obj = getattr(obj, name)
    return obj, last


@dataclass(frozen=True)
class _Slot:
    """One canonical field and where it lives on the reference object."""

    field: StateField
    index: int | None


class AttrMap:
    """Reads and writes one env's canonical state through the spec's ``attr`` mappings."""

    def __init__(self, spec: EnvSpec, allow_elapsed_steps: bool) -> None:
        self.spec = spec
        self.elapsed_field: StateField | None = None
        self.attributes: dict[str, list[_Slot]] = {}
        for f in spec.state:
            attr = f.attr or ""
            if attr == ELAPSED_STEPS:
                if not allow_elapsed_steps:
                    raise BadInput(
                        f"{spec.name}: field {f.name} maps to {ELAPSED_STEPS}, which only a "
                        "gymnasium reference with a TimeLimit wrapper has"
                    )
                self.elapsed_field = f
                continue
            match = _ATTR.match(attr)
            if match is None:
                raise BadInput(
                    f"{spec.name}: field {f.name} has attr {attr!r}; expected 'name', "
                    f"'name[i]' (either may be dotted: 'data.qpos') or '{ELAPSED_STEPS}'"
                )
            name, index = match.group(1), match.group(2)
            self.attributes.setdefault(name, []).append(
                _Slot(f, None if index is None else int(index))
            )
        for name, slots in self.attributes.items():
            if len(slots) > 1 and any(s.index is None for s in slots):
                raise BadInput(
                    f"{spec.name}: attribute {name!r} is mapped both whole and by element"
                )

    def write(self, root: Any, state: State, row: int, time_limit: Any = None) -> None:
        """Set ``root``'s attributes (and the TimeLimit counter) from row ``row`` of ``state``."""
        for path, slots in self.attributes.items():
            obj, name = _owner(root, path)
            if slots[0].index is None and slots[0].field.pad is not None:
                setattr(obj, name, _unpad(slots[0].field, state[slots[0].field.name][row]))
                continue
            if slots[0].index is None:
                value = np.asarray(state[slots[0].field.name][row], dtype=slots[0].field.np_dtype)
                # scalars go in as numpy scalars so the env's arithmetic keeps the canonical dtype
                setattr(obj, name, value[()] if value.ndim == 0 else value.copy())
                continue
            dtype = np.result_type(*(s.field.np_dtype for s in slots))
            current = getattr(obj, name, None)
            size = max(s.index for s in slots if s.index is not None) + 1
            if current is not None and np.size(current) >= size:
                array = np.array(current, dtype=dtype).reshape(-1)
            else:
                array = np.zeros(size, dtype=dtype)
            for s in slots:
                array[s.index] = state[s.field.name][row]
            setattr(obj, name, array)
        if self.elapsed_field is not None:
            time_limit._elapsed_steps = int(state[self.elapsed_field.name][row])

    def read(self, root: Any, time_limit: Any = None) -> dict[str, np.ndarray]:
        """The canonical fields of one env, each cast to its spec dtype (unbatched)."""
        out: dict[str, np.ndarray] = {}
        for path, slots in self.attributes.items():
            obj, name = _owner(root, path)
            if slots[0].index is None and slots[0].field.pad is not None:
                out[slots[0].field.name] = _padded(slots[0].field, getattr(obj, name))
                continue
            value = np.asarray(getattr(obj, name))
            for s in slots:
                picked = value if s.index is None else value.reshape(-1)[s.index]
                # a copy: an attribute may be a view of live memory (MuJoCo's data.qpos), which
                # the pooled env overwrites when it serves the next row
                out[s.field.name] = np.array(picked, dtype=s.field.np_dtype)
        if self.elapsed_field is not None:
            out[self.elapsed_field.name] = np.asarray(
                time_limit._elapsed_steps, dtype=self.elapsed_field.np_dtype
            )
        return out


def _padded(f: StateField, items: Any) -> np.ndarray:
    """A reference's list as the canonical fixed array: its items, then the sentinel."""
    size = int(np.prod(f.shape))
    values = list(items)
    if len(values) > size:
        raise BadInput(
            f"field {f.name}: the reference's list has {len(values)} items, more than the "
            f"field's shape {f.shape} holds"
        )
    out = np.full(size, f.pad, dtype=f.np_dtype)
    out[: len(values)] = values
    return out.reshape(f.shape)


def _unpad(f: StateField, row: np.ndarray) -> list[Any]:
    """The canonical fixed array as the reference's list: the items before the first sentinel."""
    flat = np.asarray(row, dtype=f.np_dtype).reshape(-1)
    end = np.flatnonzero(flat == f.pad)
    return [v.item() for v in flat[: int(end[0]) if len(end) else len(flat)]]


def stack_rows(spec: EnvSpec, rows: list[dict[str, np.ndarray]]) -> State:
    """Per-env canonical dicts -> one batched canonical state, in spec field order."""
    return {f.name: np.stack([r[f.name] for r in rows]).astype(f.np_dtype) for f in spec.state}
