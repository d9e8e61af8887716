"""What the reference's source says about its state: field names and the termination predicate.

Both are guesses read from the env class's Python source with ``ast`` and are marked as such in
the draft. Names come from how the code unpacks a state attribute (``x, x_dot, theta,
theta_dot = self.state``, ``position = self.state[0]``, or ``theta1 = s[0]`` where ``s =
self.state`` somewhere in the class). The termination predicate is the expression ``step``
assigns to ``terminated``, rewritten into the spec's expression language; the caller checks it
against the flags the reference returns before keeping it.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

COMPARISONS: dict[type, str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
FUNCTIONS = {"cos", "sin", "abs", "sqrt", "arctan2", "floor", "minimum", "maximum", "clip"}


def class_tree(cls: type) -> ast.ClassDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.ClassDef) else None


def _self_attr(node: ast.AST, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _index(node: ast.AST) -> int | None:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        value = node.slice.value
        return value if isinstance(value, int) else None
    return None


def element_names(cls: type, attr: str, size: int) -> dict[int, str]:
    """Names the source gives the elements of the array attribute ``self.<attr>``."""
    tree = class_tree(cls)
    if tree is None:
        return {}
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1]
    aliases = {
        a.targets[0].id
        for a in assigns
        if isinstance(a.targets[0], ast.Name) and _self_attr(a.value, attr)
    }
    names: dict[int, str] = {}
    for a in assigns:  # x, x_dot = self.state
        target = a.targets[0]
        unpacks = _self_attr(a.value, attr) or (
            isinstance(a.value, ast.Name) and a.value.id in aliases
        )
        if isinstance(target, ast.Tuple) and len(target.elts) == size and unpacks:
            for k, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name):
                    names.setdefault(k, elt.id)
    for a in assigns:  # position = self.state[0]; theta1 = s[0]
        target, value = a.targets[0], a.value
        index = _index(value)
        if not isinstance(target, ast.Name) or index is None or not 0 <= index < size:
            continue
        assert isinstance(value, ast.Subscript)
        if _self_attr(value.value, attr) or (
            isinstance(value.value, ast.Name) and value.value.id in aliases
        ):
            names.setdefault(index, target.id)
    return names


class _Untranslatable(Exception):
    pass


class _Translator:
    """Python expression -> spec expression over ``after.<field>``."""

    def __init__(self, tree: ast.ClassDef, env: Any, fields: dict[str, str], attr_fields: dict):
        self.methods = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.env = env
        self.fields = fields  # local name -> field name
        self.attr_fields = attr_fields  # (attr, index or None) -> field name
        self.aliases: dict[str, str] = {}  # local name -> state attribute it aliases

    def expr(self, node: ast.AST) -> str:
        if isinstance(node, ast.BoolOp):
            op = " | " if isinstance(node.op, ast.Or) else " & "
            return "(" + op.join(self._wrapped(v) for v in node.values) + ")"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return f"~({self.expr(node.operand)})"
            if isinstance(node.op, ast.USub):
                return f"-{self._wrapped(node.operand)}"
        if isinstance(node, ast.Compare):
            parts, left = [], node.left
            for cmp, right in zip(node.ops, node.comparators, strict=True):
                symbol = COMPARISONS.get(type(cmp))
                if symbol is None:
                    raise _Untranslatable
                parts.append(f"({self.expr(left)} {symbol} {self.expr(right)})")
                left = right
            return " & ".join(parts) if len(parts) > 1 else parts[0]
        if isinstance(node, ast.BinOp):
            symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(node.op))
            if symbol is None:
                raise _Untranslatable
            return f"({self.expr(node.left)} {symbol} {self.expr(node.right)})"
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return repr(float(node.value)) if isinstance(node.value, float) else str(node.value)
        if isinstance(node, ast.Name) and node.id in self.fields:
            return f"after.{self.fields[node.id]}"
        if isinstance(node, ast.Attribute) and _self_attr(node, node.attr):
            if (node.attr, None) in self.attr_fields:
                return f"after.{self.attr_fields[(node.attr, None)]}"
            value = getattr(self.env, node.attr, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return repr(value)  # a constant of the env (a threshold)
            raise _Untranslatable
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            k = _index(node)
            attr = self.aliases.get(node.value.id)
            if attr is not None and (attr, k) in self.attr_fields:
                return f"after.{self.attr_fields[(attr, k)]}"
        if isinstance(node, ast.Call):
            return self.call(node)
        raise _Untranslatable

    def _wrapped(self, node: ast.AST) -> str:
        text = self.expr(node)
        simple = text.replace(".", "").replace("_", "").isalnum() or text.startswith("(")
        return text if simple else f"({text})"

    def call(self, node: ast.Call) -> str:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "bool" and len(node.args) == 1:
            return self.expr(node.args[0])
        if name in FUNCTIONS and not node.keywords:
            return f"{name}(" + ", ".join(self.expr(a) for a in node.args) + ")"
        if _self_attr(func, name) and name in self.methods and not node.args:
            return self.inline(self.methods[name])
        raise _Untranslatable

    def inline(self, method: ast.FunctionDef) -> str:
        """A method with only ``s = self.<attr>`` assignments and one ``return``."""
        saved = dict(self.aliases)
        try:
            for stmt in method.body:
                if isinstance(stmt, ast.Assert) or (
                    isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                ):
                    continue  # a docstring or a check that does not change the value
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Attribute)
                    and _self_attr(stmt.value, stmt.value.attr)
                ):
                    self.aliases[stmt.targets[0].id] = stmt.value.attr
                elif isinstance(stmt, ast.Return) and stmt.value is not None:
                    return self.expr(stmt.value)
                else:
                    raise _Untranslatable
            raise _Untranslatable
        finally:
            self.aliases = saved


def termination_guess(
    cls: type,
    env: Any,
    local_fields: dict[str, str],
    attr_fields: dict[tuple[str, int | None], str],
) -> str | None:
    """The last ``terminated = ...`` in ``step``, as a spec expression, or None."""
    tree = class_tree(cls)
    if tree is None:
        return None
    step = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "step"), None)
    if step is None:
        return None
    found = None
    for node in ast.walk(step):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "terminated"
        ):
            found = node.value
    if found is None:
        return None
    try:
        return _Translator(tree, env, local_fields, attr_fields).expr(found)
    except (_Untranslatable, RecursionError):
        return None
