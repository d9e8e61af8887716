"""Findings: what differs, where, and how to reproduce it. Plain data, rendered three ways."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class SourceLocation:
    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text.strip()}"


@dataclass
class Finding:
    level: int
    check: str
    """Machine name of the failed check, e.g. ``step.field_mismatch`` or ``crash``."""
    message: str
    fields: list[str] = field(default_factory=list)
    seed: int | None = None
    step: int | None = None
    actions: list[Any] = field(default_factory=list)
    """Action history from the reset (or from the injected state) up to the diverging step."""
    state_before: dict[str, Any] | None = None
    expected: dict[str, Any] | None = None
    actual: dict[str, Any] | None = None
    error: dict[str, float] = field(default_factory=dict)
    """Per field: absolute error (and ``<field>.ulp`` for floats)."""
    reference_lines: list[SourceLocation] = field(default_factory=list)
    port_lines: list[SourceLocation] = field(default_factory=list)
    detail: str = ""
    """Free text: a shrunk program, a stderr tail, a statistic."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """The inverse of ``to_dict`` (a report read back from JSON)."""
        lines = {
            key: [SourceLocation(**loc) for loc in data.get(key, [])]
            for key in ("reference_lines", "port_lines")
        }
        return cls(**{**data, **lines})

    @property
    def localized(self) -> bool:
        return bool(self.fields) and bool(self.port_lines)


def to_jsonable(value: Any) -> Any:
    """Convert numpy values (recursively) into JSON-friendly Python values."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        f = float(value)
        if f != f or f in (float("inf"), float("-inf")):
            return repr(f)
        return f
    return value
