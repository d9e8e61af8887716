"""Judging mutants: is a survivor equivalent (and why), and was a kill localized?

Equivalence is only claimed on mechanical grounds:

* dead code (static): the mutated line sits in a function nothing calls, or assigns a
  module-level name nothing reads. The port API (``reset``, ``step``, ...) counts as called.
* differential (dynamic): the full differential test (see ``differential.py``) found no
  input on which the mutant and the original differ under the spec's comparison.

A kill is field-localized when the verifier's finding names a key the mutant changes in one
step (a state field when it changes any, else obs/reward/flags), and line-localized when the
finding's source lines for the mutated side include the mutated line. A kill by a crash (a
Rust panic, an exception: no field to name) is site-localized when the line it was raised at
lies in the handler the mutant changed (the same function, and in Rust the same ``match``
arm). A kill by an ``rng.tape`` finding is draw-localized: the finding names the first draw
the port asked differently from the reference (its index, both sides' asks, the port's line),
and the unmutated port accounts for every draw, so that draw is one the mutant changed. A kill
is localized when any of the three holds.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from envforge.backends.jax import REQUIRED
from envforge.mutate.differential import DifferentialResult
from envforge.mutate.mutant import Mutant
from envforge.verify.thrown import handler_at

C_ENTRY_SUFFIXES = ("_reset", "_step", "_observe")


def _enclosing_function(tree: ast.Module, line: int) -> ast.FunctionDef | None:
    best: ast.FunctionDef | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        if node.lineno <= line <= (node.end_lineno or 0) and (
            best is None or node.lineno >= best.lineno
        ):
            best = node
    return best


def _loaded_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def _python_dead_code(original: str, line: int) -> str | None:
    tree = ast.parse(original)
    func = _enclosing_function(tree, line)
    if func is not None:
        if func.name in REQUIRED:
            return None
        body_refs = {
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and not _inside(func, n)
        }
        attr_refs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        if func.name not in body_refs | attr_refs:
            return f"dead code: function {func.name}() is never called"
        return None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and stmt.lineno <= line <= (stmt.end_lineno or 0):
            targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            loaded = _loaded_names(tree)
            unread = [t for t in targets if t not in loaded]
            if targets and len(unread) == len(targets):
                return f"dead code: {', '.join(unread)} is assigned but never read"
    return None


def _inside(outer: ast.AST, node: ast.AST) -> bool:
    lo, hi = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", 0) or 0
    return lo <= getattr(node, "lineno", -1) <= hi


def _c_dead_code(original: str, line: int) -> str | None:
    """A C function (brace block starting at column 0) whose name appears nowhere else."""
    lines = original.splitlines()
    start = line - 1
    while start >= 0 and not re.match(r"^[A-Za-z_][\w\s\*]*\b(\w+)\s*\([^;]*$", lines[start]):
        if lines[start].startswith("}"):
            return None  # the mutated line is outside any function
        start -= 1
    if start < 0:
        return None
    m = re.match(r"^[A-Za-z_][\w\s\*]*\b(\w+)\s*\(", lines[start])
    if m is None:
        return None
    name = m.group(1)
    if name.endswith(C_ENTRY_SUFFIXES) or name == "main":
        return None
    uses = len(re.findall(rf"\b{re.escape(name)}\s*\(", original))
    return f"dead code: function {name}() is never called" if uses <= 1 else None


def reaches_reset(mutant: Mutant, original: str) -> bool:
    """Can this mutation change what ``reset`` returns? Python is followed from ``reset``
    through the functions it names (module-level code: assume so); a C or Rust text mutation
    is assumed to, since no call graph is read from those sources."""
    if not mutant.file.endswith(".py"):
        return True
    tree = ast.parse(original)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "reset" not in functions:
        return False
    reached, todo = set(), ["reset"]
    while todo:
        name = todo.pop()
        if name in reached or name not in functions:
            continue
        reached.add(name)
        todo.extend(n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name))
    func = _enclosing_function(tree, mutant.line)
    return func is None or func.name in reached


def static_equivalence(mutant: Mutant, original: str) -> str | None:
    """A mechanical reason the mutant cannot change behaviour, or None."""
    if mutant.file.endswith(".py"):
        return _python_dead_code(original, mutant.line)
    if mutant.file.endswith((".c", ".h")):
        return _c_dead_code(original, mutant.line)
    return None


def differential_equivalence(result: DifferentialResult | None, full: bool) -> str | None:
    if result is None or not full or result.differs or result.inconclusive:
        return None
    resets = (
        f"the same reset distribution over {result.resets} seeds"
        if result.reset_comparison == "distribution"
        else f"identical resets for {result.resets} seeds"
    )
    steps = f"identical steps on {result.transitions} transitions"
    if result.unconfirmed:  # distribution mode: same-key differences, none borne out
        steps = (
            f"steps on {result.transitions} transitions of which {result.unconfirmed} differed "
            "from the same key but not in distribution when resampled"
        )
    return (
        f"differential: {resets} and {steps} "
        "(sampled states x every action or 8 per state, in batches and one per call; rollout "
        "states; branch-threshold states)"
    )


def tolerance_equivalence(result: DifferentialResult | None, full: bool) -> str | None:
    """Every difference found is a threshold flag flip the spec's comparison excuses."""
    if result is None or not full or result.error or result.inconclusive:
        return None
    if not result.rows_differing or result.rows_flag_only != result.rows_differing:
        return None
    return (
        f"equivalent within the spec's tolerance: all {result.rows_differing} differing "
        f"transitions (of {result.transitions}) differ only in `terminated` on a float "
        "threshold, where the mutant's flag is what the spec's termination predicate says of "
        "its own next state or of one within tolerance of it; the comparison excuses such "
        "flips by design"
    )


def affected_keys(result: DifferentialResult | None, state_fields: list[str]) -> set[str]:
    """The keys a localized finding should name: the changed state fields, and the outputs
    that changed in a step whose next state did not (a rule read wrongly where only the
    observation or reward uses it: that output is where the mutant shows first); with no
    state field changed, every changed output."""
    if result is None:
        return set()
    changed = set(result.differing)
    fields = changed & set(state_fields)
    if not fields:
        return changed
    return fields | set(result.alone)  # every alone key also counts in ``differing``


def field_localized(finding: dict[str, Any] | None, affected: set[str]) -> bool:
    if not finding or not affected:
        return False
    return bool(set(finding.get("fields") or []) & affected)


def draw_localized(finding: dict[str, Any] | None) -> bool:
    """An ``rng.tape`` finding that names the draw the port asked differently (see above)."""
    if not finding or finding.get("check") != "rng.tape":
        return False
    return bool((finding.get("extra") or {}).get("draw"))


def line_localized(finding: dict[str, Any] | None, mutant: Mutant, side: str) -> bool:
    if not finding:
        return False
    key = "port_lines" if side == "port" else "reference_lines"
    name = mutant.file.rsplit("/", 1)[-1]
    return any(
        int(loc.get("line", -1)) == mutant.line and str(loc.get("file", "")).endswith(name)
        for loc in finding.get(key) or []
    )


def site_localized(
    finding: dict[str, Any] | None, mutant: Mutant, side: str, original: str
) -> bool:
    """A finding that names no field, raised (its first source line: where it was thrown) in
    the handler holding the mutated line. Mutants keep the line count, so both lines are read
    in the original source."""
    if not finding or finding.get("fields"):
        return False
    key = "port_lines" if side == "port" else "reference_lines"
    thrown = (finding.get(key) or [None])[0]
    if not thrown or not str(thrown.get("file", "")).endswith("/" + mutant.file.lstrip("./")):
        return False
    lines = original.splitlines()
    suffix = "." + mutant.file.rsplit(".", 1)[-1]
    mutated = handler_at(lines, mutant.line, suffix)
    return mutated is not None and handler_at(lines, int(thrown.get("line", -1)), suffix) == mutated
