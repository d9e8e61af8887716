"""Canonical state fields <-> attributes of a stateful reference object.

A spec maps each canonical field onto the reference with its ``attr``:

- ``name``            the attribute ``env.name`` holds the field's value (any shape);
- ``name[i]``         element ``i`` of the array attribute ``env.name``;
- ``a.b``             an attribute of an attribute (MuJoCo envs keep their state in
                      ``env.data.qpos``); ``a.b[i]`` likewise;
- ``a[k].b``          an attribute of item ``k`` of a list attribute (LunarLander's
                      ``legs[0].position[1]``: an index before a dot picks an item, the index
                      at the end an element of the array the path reaches);
- ``@elapsed_steps``  the step counter of gymnasium's ``TimeLimit`` wrapper;
- ``@seed``           the seed the env was last reset with (gymnasium's ``np_random_seed``):
                      the Driver resets the fresh instance with it before writing the other
                      fields, so what ``reset`` builds from the seed and no field can carry (a
                      terrain made of Box2D fixtures) is built again alike.

A value that a native object's setter refuses as a numpy scalar (a Box2D body's ``awake``
wants a Python ``bool``) is written as the Python value. After the fields are written, each
Box2D world whose bodies were moved is asked for its new contacts, as the end of a Box2D step
does, so the next step starts with the contacts the moved bodies touch.

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
from envforge.spec.tables import StateField

ELAPSED_STEPS = "@elapsed_steps"
SEED = "@seed"
_ATTR = re.compile(r"^((?:[A-Za-z_]\w*(?:\[\d+\])?\.)*[A-Za-z_]\w*)(?:\[(\d+)\])?$")
_SEGMENT = re.compile(r"^([A-Za-z_]\w*)(?:\[(\d+)\])?$")


def owner(obj: Any, path: str) -> tuple[Any, str]:
    """The object that holds the last attribute of a dotted ``path`` (whose parts may pick an
    item of a list: ``legs[0].position``), and that attribute's name."""
    *parents, last = path.split(".")
    for part in parents:
        match = _SEGMENT.match(part)
        if match is None:
            raise BadInput(f"attribute path {path!r}: cannot read {part!r}")
        obj = getattr(obj, match.group(1))
        if match.group(2) is not None:
            obj = obj[int(match.group(2))]
    return obj, last


def set_value(obj: Any, name: str, value: Any) -> None:
    """``obj.name = value``; a native setter that refuses numpy scalars gets the Python value."""
    try:
        setattr(obj, name, value)
    except TypeError:
        setattr(obj, name, value.tolist() if isinstance(value, np.ndarray | np.generic) else value)


def refresh_contacts(owners: list[Any]) -> None:
    """Box2D bodies moved by hand: their worlds look for the contacts they now touch (a Box2D
    step does this at its end, so the next step solves with them)."""
    worlds: list[Any] = []
    for obj in owners:
        world = getattr(obj, "world", None) if hasattr(obj, "linearVelocity") else None
        manager = getattr(world, "contactManager", None)
        if manager is not None and not any(world == w for w in worlds):
            worlds.append(world)
            manager.FindNewContacts()


def reset_seed(root: Any) -> int:
    """The seed ``root`` (a gymnasium env) was last reset with."""
    seed = getattr(root, "_np_random_seed", None)
    if seed is None:
        raise BadInput(
            f"field with attr {SEED!r}: {type(root).__name__} was not reset with a seed "
            "(only gymnasium envs keep np_random_seed)"
        )
    return int(seed)


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
        self.seed_field: StateField | None = None
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
            if attr == SEED:
                self.seed_field = f
                continue
            match = _ATTR.match(attr)
            if match is None:
                raise BadInput(
                    f"{spec.name}: field {f.name} has attr {attr!r}; expected 'name', "
                    f"'name[i]' (either may be dotted: 'data.qpos', 'legs[0].angle'), "
                    f"'{ELAPSED_STEPS}' or '{SEED}'"
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
        """Set ``root``'s attributes (and the TimeLimit counter) from row ``row`` of ``state``
        (a ``@seed`` field is not written here: the Driver resets the env with it first)."""
        owners: list[Any] = []
        for path, slots in self.attributes.items():
            obj, name = owner(root, path)
            owners.append(obj)
            if slots[0].index is None and slots[0].field.pad is not None:
                setattr(obj, name, _unpad(slots[0].field, state[slots[0].field.name][row]))
                continue
            if slots[0].index is None:
                value = np.asarray(state[slots[0].field.name][row], dtype=slots[0].field.np_dtype)
                # scalars go in as numpy scalars so the env's arithmetic keeps the canonical dtype
                set_value(obj, name, value[()] if value.ndim == 0 else value.copy())
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
            set_value(obj, name, array)
        refresh_contacts(owners)
        if self.elapsed_field is not None:
            time_limit._elapsed_steps = int(state[self.elapsed_field.name][row])

    def seed_of(self, state: State, row: int) -> int | None:
        """The seed row ``row`` says its env was reset with (None: the spec has no ``@seed``)."""
        if self.seed_field is None:
            return None
        return int(state[self.seed_field.name][row])

    def read(self, root: Any, time_limit: Any = None) -> dict[str, np.ndarray]:
        """The canonical fields of one env, each cast to its spec dtype (unbatched)."""
        out: dict[str, np.ndarray] = {}
        for path, slots in self.attributes.items():
            obj, name = owner(root, path)
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
        if self.seed_field is not None:
            out[self.seed_field.name] = np.asarray(reset_seed(root), dtype=self.seed_field.np_dtype)
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
