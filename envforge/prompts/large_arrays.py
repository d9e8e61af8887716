"""Large array values in a finding as a prompt shows them: the elements that differ."""

from __future__ import annotations

from typing import Any

import numpy as np

LARGE_ARRAY = 64
"""A state value with more elements than this (an emulator's memory, a framebuffer) is shown
in a finding only at the elements that differ: chip8's 4 KiB memory printed whole in the state
before and in both results made a repair prompt of ~24 k tokens."""
ELEMENTS_SHOWN = 16


def _large_array(value: Any) -> np.ndarray | None:
    if not isinstance(value, list):
        return None
    try:
        array = np.asarray(value)
    except ValueError:  # ragged
        return None
    return array if array.dtype.kind in "biuf" and array.size > LARGE_ARRAY else None


def _elements(name: str, array: np.ndarray, where: np.ndarray) -> str:
    return ", ".join(
        f"{name}{''.join(f'[{i}]' for i in index)} = {array[tuple(index)]}" for index in where
    )


def cut_large_arrays(view: dict[str, Any]) -> None:
    """Large arrays in ``expected``/``actual`` become the elements that differ (the first
    ``ELEMENTS_SHOWN``); in ``state_before``, the same elements before the step, or for a field
    that does not differ its common value and the elements that have another (a count, if many)."""
    expected, actual = view.get("expected") or {}, view.get("actual") or {}
    before = view.get("state_before") or {}
    differ: dict[str, np.ndarray] = {}
    for name, value in expected.items():
        want, got = _large_array(value), _large_array(actual.get(name))
        if want is None or got is None or want.shape != got.shape:
            continue
        where = np.argwhere(want != got)[:ELEMENTS_SHOWN]
        differ[name] = where
        count = int(np.count_nonzero(want != got))
        more = f" (the first {len(where)} shown)" if count > len(where) else ""
        expected[name] = f"{count} of {want.size} elements differ{more}: " + _elements(
            name, want, where
        )
        actual[name] = _elements(name, got, where)
    for name, value in before.items():
        array = _large_array(value)
        if array is None:
            continue
        if name in differ:
            before[name] = f"{array.size} elements, shown where the results differ: " + _elements(
                name, array, differ[name]
            )
            continue
        values, counts = np.unique(array, return_counts=True)
        common = values[np.argmax(counts)]
        others = np.argwhere(array != common)
        if len(others) <= ELEMENTS_SHOWN:
            listed = f" except {_elements(name, array, others)}" if len(others) else ""
            before[name] = f"{array.size} elements, all {common}{listed}"
        else:
            before[name] = (
                f"{array.size} elements from {array.min()} to {array.max()}, {len(others)} of "
                f"them not {common} (not shown: the results do not differ here)"
            )
