"""Mutation operators for Python/JAX ports, found on the syntax tree, applied to the text.

Only code that runs is mutated: function bodies, module-level and class-level values. Never
imports, docstrings, annotations, decorators or default arguments.

| operator   | change |
|------------|--------|
| arith      | ``+ - * / // % ** << >> & | ^`` swapped for a neighbour (also in ``op=``) |
| compare    | ``<`` -> ``<=`` and ``>=`` (boundary, negation), and so on for each comparison |
| constant   | a float literal scaled by 1.1 (0.0 becomes 0.1) |
| off_by_one | an integer literal plus and minus one |
| sign       | a unary minus or ``~``/``not`` dropped, a nonzero literal negated |
| clip       | ``clip(x, lo, hi)`` / ``minimum`` / ``maximum`` replaced by ``x`` |
| where      | ``where(c, a, b)`` / ``select`` replaced by ``a``, and by ``b`` |
| field_swap | ``s.f`` / ``f=`` / ``d["f"]`` naming a canonical field renamed to a sibling field |
| rng        | a random draw's key or RNG state changed (``fold_in(key, 1)``, ``seed + 1``, ``x ^ 1``) |
| probability | a probability changed: a literal in (0, 1) by its complement, a fraction ``a / b`` (a < b) by ``a / (b + 1)`` (1/3 -> 1/4) |
| draw_skip  | a draw from the RNG tape interface (``draws.random()`` ...) skipped: a constant instead, the tape not advanced |
| draw_swap  | two draw statements of one block exchanged, where neither reads what the other's block writes |
| wrong_end  | an index that came from a draw counted from the other end (``deck[i]`` -> ``deck[-1 - i]``) |
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from envforge.mutate.mutant import Edit, SourceText

ARITH_SWAPS: dict[type, tuple[str, str]] = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "/"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"),
    ast.Mod: ("%", "//"),
    ast.Pow: ("**", "*"),
    ast.LShift: ("<<", ">>"),
    ast.RShift: (">>", "<<"),
    ast.BitAnd: ("&", "|"),
    ast.BitOr: ("|", "&"),
    ast.BitXor: ("^", "|"),
}
COMPARE_SWAPS: dict[type, tuple[str, tuple[str, ...]]] = {
    ast.Lt: ("<", ("<=", ">=")),
    ast.LtE: ("<=", ("<", ">")),
    ast.Gt: (">", (">=", "<=")),
    ast.GtE: (">=", (">", "<")),
    ast.Eq: ("==", ("!=",)),
    ast.NotEq: ("!=", ("==",)),
}
CLIP_FUNCS = ("clip", "minimum", "maximum", "clamp", "clampf")
WHERE_FUNCS = ("where", "select")
RNG_WORDS = ("rng", "random", "uniform", "normal", "bernoulli", "categorical")
DRAW_KINDS = {"random": "0.5", "uniform": "0.5", "normal": "0.5", "integers": "0", "choice": "0"}
"""Methods of ``envforge.rng.jax_draws.Draws`` and the constant a skipped draw leaves."""


def draw_call(node: ast.AST) -> str | None:
    """The kind of a ``<draws>.<kind>(...)`` call on a name containing "draw", else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    base = node.func.value
    if node.func.attr in DRAW_KINDS and isinstance(base, ast.Name) and "draw" in base.id:
        return node.func.attr
    return None


def _draw_statement(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and draw_call(node.value) is not None


def _names(nodes: list[ast.stmt], ctx: type) -> set[str]:
    return {
        n.id
        for stmt in nodes
        for n in ast.walk(stmt)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)
    }


def call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


class PythonMutator:
    """Collects :class:`Edit` s for one Python module."""

    def __init__(self, source: str, sibling_fields: dict[str, str]) -> None:
        self.src = SourceText(source)
        self.tree = ast.parse(source)
        self.siblings = sibling_fields
        self.local_functions = {
            n.name for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef)
        }

    # ---- positions ------------------------------------------------------------------------
    def start(self, node: ast.AST) -> int:
        return self.src.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.src.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> str:
        return self.src.segment(self.start(node), self.end(node))

    def token(self, left: ast.AST, right: ast.AST, token: str) -> int | None:
        """Offset of operator ``token`` between two operands (skipping parens and comments)."""
        a, b = self.end(left), self.start(right)
        region = self.src.data[a:b].decode()
        i = 0
        while i < len(region):
            ch = region[i]
            if ch == "#":
                i = region.find("\n", i)
                if i < 0:
                    return None
                continue
            if region.startswith(token, i):
                return a + len(region[:i].encode())
            i += 1
        return None

    # ---- which nodes run ------------------------------------------------------------------
    def executed(self) -> Iterator[ast.AST]:
        """Expression nodes that are evaluated at run time (see the module docstring)."""
        stack: list[ast.AST] = [*self.tree.body]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                stack.extend(node.body)
                continue
            if isinstance(node, ast.AnnAssign):
                if node.value is not None:
                    stack.append(node.value)
                continue
            yield node
            stack.extend(ast.iter_child_nodes(node))

    # ---- operators ------------------------------------------------------------------------
    def edits(self) -> list[Edit]:
        out: list[Edit] = []
        drawn = self._drawn_indices()
        out.extend(self._draw_swaps())
        for node in self.executed():
            if draw_call(node) is not None:
                out.extend(self._draw_skip(node))  # type: ignore[arg-type]
            index = node.slice if isinstance(node, ast.Subscript) else None
            if isinstance(index, ast.Name) and index.id in drawn:
                out.extend(self._wrong_end(index))
            if isinstance(node, ast.BinOp):
                out.extend(self._fraction(node))
                out.extend(self._arith(node.left, node.right, node.op, ""))
            elif isinstance(node, ast.AugAssign):
                out.extend(self._arith(node.target, node.value, node.op, "="))
            elif isinstance(node, ast.Compare):
                out.extend(self._compare(node))
            elif isinstance(node, ast.Constant):
                out.extend(self._constant(node))
            elif isinstance(node, ast.UnaryOp):
                out.extend(self._unary(node))
            elif isinstance(node, ast.Call):
                out.extend(self._call(node))
            elif isinstance(node, ast.Attribute) and node.attr in self.siblings:
                out.extend(self._field_attr(node))
            elif isinstance(node, ast.Subscript):
                out.extend(self._field_key(node))
        return out

    def _arith(self, left: ast.AST, right: ast.AST, op: ast.operator, suffix: str) -> list[Edit]:
        swap = ARITH_SWAPS.get(type(op))
        if swap is None:
            return []
        old, new = swap[0] + suffix, swap[1] + suffix
        at = self.token(left, right, old)
        if at is None:
            return []
        return [Edit("arith", at, at + len(old), new, f"`{old}` -> `{new}`")]

    def _compare(self, node: ast.Compare) -> list[Edit]:
        out = []
        left: ast.AST = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            swap = COMPARE_SWAPS.get(type(op))
            if swap is not None:
                old, news = swap
                at = self.token(left, right, old)
                if at is not None:
                    for new in news:
                        out.append(Edit("compare", at, at + len(old), new, f"`{old}` -> `{new}`"))
            left = right
        return out

    def _constant(self, node: ast.Constant) -> list[Edit]:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            return []
        a, b = self.start(node), self.end(node)
        old = self.text(node)
        out = []
        if isinstance(value, int):
            for new in (value + 1, value - 1):
                out.append(Edit("off_by_one", a, b, repr(new), f"`{old}` -> `{new}`"))
        else:
            new_f = value * 1.1 if value != 0.0 else 0.1
            out.append(Edit("constant", a, b, repr(new_f), f"`{old}` -> `{new_f!r}`"))
        if value != 0:
            out.append(Edit("sign", a, b, f"({-value!r})", f"`{old}` -> `{-value!r}`"))
        if isinstance(value, float) and 0.0 < value < 1.0 and value != 0.5:
            new_p = 1.0 - value
            out.append(Edit("probability", a, b, repr(new_p), f"`{old}` -> `{new_p!r}`"))
        return out

    # ---- randomness inside step (ports using envforge.rng.jax_draws.Draws) -----------------
    def _fraction(self, node: ast.BinOp) -> list[Edit]:
        """``1.0 / 3.0`` -> ``1.0 / (3.0 + 1)``: a probability written as a fraction."""
        left, right = node.left, node.right
        if not (isinstance(node.op, ast.Div) and isinstance(left, ast.Constant)):
            return []
        if not isinstance(right, ast.Constant):
            return []
        a, b = left.value, right.value
        if not (isinstance(a, int | float) and isinstance(b, int | float) and 0 < a < b):
            return []
        old = self.text(right)
        return [
            Edit(
                "probability",
                self.start(right),
                self.end(right),
                f"({old} + 1)",
                f"`{self.text(node)}` -> `{self.text(left)} / ({old} + 1)`",
            )
        ]

    def _draw_skip(self, node: ast.Call) -> list[Edit]:
        kind = draw_call(node)
        assert kind is not None and isinstance(node.func, ast.Attribute)
        base = self.text(node.func.value)
        new = f"({DRAW_KINDS[kind]}, {base})"
        return [
            Edit("draw_skip", self.start(node), self.end(node), new, f"`{self.text(node)}` skipped")
        ]

    def _drawn_indices(self) -> set[str]:
        """Names assigned an integer draw (``index, draws = draws.choice(13)``)."""
        out = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and draw_call(node.value) in ("choice", "integers"):
                target = node.targets[0]
                first = target.elts[0] if isinstance(target, ast.Tuple) else target
                if isinstance(first, ast.Name):
                    out.add(first.id)
        return out

    def _wrong_end(self, index: ast.Name) -> list[Edit]:
        a, b = self.start(index), self.end(index)
        new = f"-1 - {index.id}"
        return [Edit("wrong_end", a, b, new, f"`[{index.id}]` -> `[{new}]`")]

    def _draw_swaps(self) -> list[Edit]:
        """Two draw statements of one block taken in the other order: the later moved before
        the earlier, or the earlier after the later, where no statement in between feeds the
        moved one or reads what it wrote (a port whose second draw depends on the first has
        none)."""
        out: list[Edit] = []
        lines = self.src.text.splitlines(keepends=True)
        for block in ast.walk(self.tree):
            body = getattr(block, "body", None)
            if not isinstance(body, list):
                continue
            draws = [i for i, stmt in enumerate(body) if _draw_statement(stmt)]
            for i, j in zip(draws, draws[1:], strict=False):
                first, second = body[i], body[j]
                a, b = first.lineno - 1, second.lineno - 1
                c, d = first.end_lineno or first.lineno, second.end_lineno or second.lineno
                if not _names([second], ast.Load) & _names(body[i:j], ast.Store) - {"draws"}:
                    text = "".join(lines[b:d] + lines[a:b])  # the later one first
                elif not _names([first], ast.Store) & _names(body[i + 1 : j + 1], ast.Load) - {
                    "draws"
                }:
                    text = "".join(lines[c:d] + lines[a:c])  # the earlier one last
                else:
                    continue
                start = self.src.offset(first.lineno, 0)
                end = self.src.offset(d, 0) + len(lines[d - 1].encode())
                what = f"draws on lines {first.lineno} and {second.lineno} in the other order"
                out.append(Edit("draw_swap", start, end, text, what))
        return out

    def _unary(self, node: ast.UnaryOp) -> list[Edit]:
        if not isinstance(node.op, ast.USub | ast.Invert | ast.Not):
            return []
        operand = self.text(node.operand)
        old = self.text(node)
        return [
            Edit(
                "sign", self.start(node), self.end(node), f"({operand})", f"`{old}` -> `{operand}`"
            )
        ]

    def _call(self, node: ast.Call) -> list[Edit]:
        name = call_name(node)
        a, b = self.start(node), self.end(node)
        args = node.args
        out: list[Edit] = []
        if name in CLIP_FUNCS and args:
            first = self.text(args[0])
            out.append(Edit("clip", a, b, f"({first})", f"`{name}(...)` -> its first argument"))
        if name in WHERE_FUNCS and len(args) == 3:
            for which, arg in (("true", args[1]), ("false", args[2])):
                out.append(
                    Edit(
                        "where", a, b, f"({self.text(arg)})", f"`{name}(...)` -> its {which} branch"
                    )
                )
        out.extend(self._rng(node, name))
        for kw in node.keywords:
            if kw.arg in self.siblings and kw.arg is not None:
                at = self.start(kw)
                new = self.siblings[kw.arg]
                out.append(
                    Edit("field_swap", at, at + len(kw.arg), new, f"`{kw.arg}=` -> `{new}=`")
                )
        return out

    def _rng(self, node: ast.Call, name: str) -> list[Edit]:
        if not node.args:
            return []
        arg = node.args[0]
        a, b = self.start(arg), self.end(arg)
        old = self.text(arg)
        chain = dotted(node.func)
        if ".random." in f".{chain}." and name not in ("fold_in", "split", "key_data"):
            new = f"({old} + 1)" if name in ("PRNGKey", "key") else f"jax.random.fold_in({old}, 1)"
            return [Edit("rng", a, b, new, f"`{name}({old}, ...)` -> `{name}({new}, ...)`")]
        if name in self.local_functions and any(w in name.lower() for w in RNG_WORDS):
            return [Edit("rng", a, b, f"({old} ^ 1)", f"`{name}({old})` -> `{name}({old} ^ 1)`")]
        return []

    def _field_attr(self, node: ast.Attribute) -> list[Edit]:
        new = self.siblings[node.attr]
        end = self.end(node)
        return [Edit("field_swap", end - len(node.attr), end, new, f"`.{node.attr}` -> `.{new}`")]

    def _field_key(self, node: ast.Subscript) -> list[Edit]:
        key = node.slice
        if not (isinstance(key, ast.Constant) and key.value in self.siblings):
            return []
        old = str(key.value)
        new = self.siblings[old]
        text = self.text(key)
        return [
            Edit(
                "field_swap",
                self.start(key),
                self.end(key),
                text.replace(old, new),
                f"`[{text}]` -> `[{text.replace(old, new)}]`",
            )
        ]


def python_edits(source: str, sibling_fields: dict[str, str]) -> list[Edit]:
    return PythonMutator(source, sibling_fields).edits()
