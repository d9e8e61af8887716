"""Small, safe, vectorized expressions used in env specs (events, termination, scripted policies).

An expression is Python syntax restricted to arithmetic, comparisons, ``& | ~``, subscripts,
attribute access on a few namespaces (``before.x``, ``after.x``) and a whitelist of numpy
functions. It is validated when the spec loads and evaluated on whole batches.

Its cost is bounded before it runs. Arithmetic on arrays costs what the batch costs; only
constants can grow without bound (Python's integers have no width: ``9**9**9`` is one
operation that runs for hours), so the parts made of constants alone are computed when the
spec loads, each value held to :data:`INT_BITS` bits, and sequences take no arithmetic
(``(0,) * 10**9``). Evaluation has a deadline too: inside :func:`evaluation_deadline` (the
verifier's ``--timeout``) an evaluation that runs past it is stopped with ExpressionTimeout.
"""

from __future__ import annotations

import ast
import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import numpy as np

from envforge.errors import BadInput

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


MAX_SOURCE_CHARS = 10_000
"""Longest expression (the shipped specs' longest is about 500 characters)."""
MAX_NODES = 2_000
"""Most syntax nodes in one expression (the shipped specs' most is about 260)."""
INT_BITS = 64
"""Widest integer a constant part may compute: what an int64 array could hold, and more."""
CONSTANT_TYPES = (bool, int, float)


class ExprError(ValueError):
    pass


class ExpressionTimeout(BadInput):
    """An evaluation ran past the deadline: the spec asks for more than a call may take."""


_DEADLINE: ContextVar[float | None] = ContextVar("expression_deadline", default=None)
_NOT_CONSTANT = object()


@contextlib.contextmanager
def evaluation_deadline(seconds: float | None) -> Iterator[None]:
    """Within this block, each evaluation of an expression may take at most ``seconds``."""
    token = _DEADLINE.set(seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _constant_value(node: ast.AST, source: str) -> Any:
    """The value of ``node`` if it is made of constants alone (computed here, each step held
    to :data:`INT_BITS` bits), else ``_NOT_CONSTANT``; the constant parts inside a node that is
    not constant are checked the same way. ExprError for a constant past the bounds."""
    if isinstance(node, ast.Constant):
        if node.value is None or node.value is Ellipsis:  # x[:, None], x[..., 0]
            return _NOT_CONSTANT
        if not isinstance(node.value, CONSTANT_TYPES):
            raise ExprError(f"only numbers may be constants in {source!r}, got {node.value!r}")
        return _bounded(node.value, source)
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _constant_value(node.operand, source)
        if value is _NOT_CONSTANT:
            return value
        return _bounded(_apply(node.op, value, None, source), source)
    if isinstance(node, ast.BinOp):
        for side in (node.left, node.right):
            if isinstance(side, ast.Tuple):
                raise ExprError(f"arithmetic on a tuple is not allowed in {source!r}")
        left = _constant_value(node.left, source)
        right = _constant_value(node.right, source)
        if left is _NOT_CONSTANT or right is _NOT_CONSTANT:
            return _NOT_CONSTANT
        return _bounded(_apply(node.op, left, right, source), source)
    for child in ast.iter_child_nodes(node):
        indexes = isinstance(node, ast.Subscript) and child is node.slice
        if isinstance(child, ast.Tuple) and not (indexes or isinstance(node, ast.Call | ast.Tuple)):
            raise ExprError(f"a tuple may only index or be an argument in {source!r}")
        _constant_value(child, source)
    return _NOT_CONSTANT


def _bounded(value: Any, source: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > INT_BITS:
        raise ExprError(
            f"a constant in {source!r} needs {value.bit_length()} bits, over the {INT_BITS} allowed"
        )
    if isinstance(value, complex) or (isinstance(value, float) and math.isinf(value)):
        raise ExprError(f"a constant part of {source!r} is {value!r}: not a finite real number")
    return value


def _apply(op: ast.AST, left: Any, right: Any, source: str) -> Any:
    """One operation on constants, refused before it starts when its result would be wide."""
    wide = isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int)
    if wide and abs(left) > 1 and right * math.log2(abs(left)) > INT_BITS + 1:
        raise ExprError(
            f"{left} ** {right} in {source!r} is wider than the {INT_BITS} bits allowed"
        )
    operations: dict[type, Any] = {
        ast.Add: lambda: left + right,
        ast.Sub: lambda: left - right,
        ast.Mult: lambda: left * right,
        ast.Div: lambda: left / right,
        ast.FloorDiv: lambda: left // right,
        ast.Mod: lambda: left % right,
        ast.Pow: lambda: left**right,
        ast.BitAnd: lambda: left & right,
        ast.BitOr: lambda: left | right,
        ast.BitXor: lambda: left ^ right,
        ast.USub: lambda: -left,
        ast.UAdd: lambda: +left,
        ast.Invert: lambda: ~left,
        ast.Not: lambda: not left,
    }
    try:
        return operations[type(op)]()
    except (ArithmeticError, TypeError, ValueError) as e:  # 1/0, a float overflow, 0.5 & 1
        raise ExprError(f"a constant part of {source!r} cannot be computed: {e}") from None


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
        if len(source) > MAX_SOURCE_CHARS:
            raise ExprError(f"{len(source)} characters, over the {MAX_SOURCE_CHARS} allowed")
        try:
            # parenthesized, so that a long expression may span lines (a TOML multi-line string)
            tree = ast.parse(f"(\n{source}\n)", mode="eval")
        except SyntaxError as e:
            raise ExprError(f"invalid syntax in {source!r}: {e.msg}") from None
        except (RecursionError, MemoryError):  # nested past what the parser takes
            raise ExprError(f"nested too deeply in {source[:80]!r}...") from None
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            raise ExprError(f"{len(nodes)} syntax nodes, over the {MAX_NODES} allowed")
        for node in nodes:
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
        try:
            _constant_value(tree.body, source)
            self._code = compile(tree, "<spec expression>", "eval")
        except RecursionError:
            raise ExprError(f"nested too deeply in {source[:80]!r}...") from None

    def __call__(self, **inputs: Any) -> Any:
        scope: dict[str, Any] = {"__builtins__": {}}
        scope.update(FUNCTIONS)
        scope.update(CONSTANTS)
        for key, value in inputs.items():
            scope[key] = Namespace(value) if isinstance(value, Mapping) else value
        limit = _DEADLINE.get()
        with np.errstate(all="ignore"), self._stopped_after(limit):
            return eval(self._code, scope)  # noqa: S307 - validated AST, no builtins

    @contextlib.contextmanager
    def _stopped_after(self, limit: float | None) -> Iterator[None]:
        """Stop the evaluation at ``limit`` seconds: by a timer signal in the main thread
        (between two operations), elsewhere by the clock once it returns."""
        if limit is None:
            yield
            return
        late = ExpressionTimeout(
            f"the spec expression {self.source!r} took longer than the {limit:g} s a call may "
            "take (--timeout)"
        )
        start = time.monotonic()
        if threading.current_thread() is not threading.main_thread():
            yield
            if time.monotonic() - start > limit:
                raise late
            return

        def stop(signum: int, frame: object) -> None:
            raise late

        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
