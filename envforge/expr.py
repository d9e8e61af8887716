"""Small, safe, vectorized expressions used in env specs (events, termination, scripted policies).

An expression is Python syntax restricted to arithmetic, comparisons, ``& | ~``, subscripts,
attribute access on a few namespaces (``before.x``, ``after.x``) and a whitelist of numpy
functions. It is validated when the spec loads and evaluated on whole batches.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import numpy as np

FUNCTIONS: dict[str, Any] = {
    "abs": np.abs,
    "where": np.where,
    "minimum": np.minimum,
    "maximum": np.maximum,
    "clip": np.clip,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "arctan2": np.arctan2,
    "sign": np.sign,
    "isclose": np.isclose,
    "floor": np.floor,
    "float32": np.float32,
    "int32": np.int32,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_not": np.logical_not,
}
CONSTANTS: dict[str, Any] = {"pi": np.pi, "True": True, "False": False}

_ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.Constant,
    ast.IfExp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.USub,
    ast.UAdd,
    ast.Invert,
    ast.Not,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Eq,
    ast.NotEq,
)


class ExprError(ValueError):
    pass


class Namespace:
    """Attribute access over a dict of arrays: ``after.ball_x``."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


class Expression:
    """A validated expression over named inputs."""

    def __init__(self, source: str, names: Mapping[str, set[str] | None]) -> None:
        """``names`` maps each allowed top-level name to its allowed attributes (None: any/none)."""
        self.source = source
        try:
            # parenthesized, so that a long expression may span lines (a TOML multi-line string)
            tree = ast.parse(f"(\n{source}\n)", mode="eval")
        except SyntaxError as e:
            raise ExprError(f"invalid syntax in {source!r}: {e.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED_NODES):
                raise ExprError(f"{type(node).__name__} is not allowed in {source!r}")
            if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            ):
                raise ExprError(
                    f"only these functions may be called: {', '.join(sorted(FUNCTIONS))}"
                )
            if (
                isinstance(node, ast.Name)
                and node.id not in FUNCTIONS
                and node.id not in CONSTANTS
                and node.id not in names
            ):
                raise ExprError(
                    f"unknown name {node.id!r} in {source!r}; known: {', '.join(sorted(names))}"
                )
            if isinstance(node, ast.Attribute):
                if not isinstance(node.value, ast.Name) or node.value.id not in names:
                    raise ExprError(f"attribute access only on {sorted(names)} in {source!r}")
                allowed = names[node.value.id]
                if allowed is not None and node.attr not in allowed:
                    raise ExprError(f"unknown field {node.value.id}.{node.attr} in {source!r}")
        self._code = compile(tree, "<spec expression>", "eval")

    def __call__(self, **inputs: Any) -> Any:
        scope: dict[str, Any] = {"__builtins__": {}}
        scope.update(FUNCTIONS)
        scope.update(CONSTANTS)
        for key, value in inputs.items():
            scope[key] = Namespace(value) if isinstance(value, Mapping) else value
        with np.errstate(all="ignore"):
            return eval(self._code, scope)  # noqa: S307 - validated AST, no builtins
