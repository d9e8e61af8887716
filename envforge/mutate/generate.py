"""Generate the mutants of one implementation file, drop the stillborn, and sample fairly.

A stillborn mutant does not even parse (Python) or compile (C): it says nothing about the
verifier, so it is counted and set aside, as mutation tools usually do.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from envforge.errors import BadInput
from envforge.mutate.ast_ops import python_edits
from envforge.mutate.mutant import Edit, Mutant, SourceText
from envforge.mutate.text_ops import text_edits
from envforge.native.cc import c_compiler
from envforge.spec import EnvSpec


def language_of(path: Path) -> str:
    suffix = path.suffix
    if suffix == ".py":
        return "python"
    if suffix in (".c", ".h"):
        return "c"
    if suffix == ".rs":
        return "rust"
    raise BadInput(f"cannot mutate {path}: no operators for {suffix or 'this'} files")


def sibling_fields(spec: EnvSpec, c_names: bool = False) -> dict[str, str]:
    """Each canonical field -> the next field with the same dtype and shape (cyclic), by the
    names the source uses (struct members for C)."""
    groups: dict[tuple[str, tuple[int, ...]], list[str]] = defaultdict(list)
    for f in spec.state:
        name = (f.c_field or f.name) if c_names else f.name
        groups[(f.dtype, f.shape)].append(name)
    out: dict[str, str] = {}
    for names in groups.values():
        if len(names) > 1:
            for i, name in enumerate(names):
                out[name] = names[(i + 1) % len(names)]
    return out


@dataclass
class Generated:
    file: Path
    original: str
    mutants: list[Mutant] = field(default_factory=list)
    stillborn: int = 0
    duplicates: int = 0
    exempt: int = 0
    """Mutants of lines marked ``envforge: no-mutate`` (see ``exempt_lines``), not generated."""


NO_MUTATE = "envforge: no-mutate"
"""A comment marking a line that must not be mutated: setup that cannot change what the
environment computes (a compilation-cache setting), so its mutants are equivalent by
construction and would only cost a campaign its time. The mark is in the source, for review."""


def exempt_lines(source: str) -> set[int]:
    """1-based numbers of the lines carrying the ``NO_MUTATE`` mark in a comment."""
    return {
        i
        for i, line in enumerate(source.splitlines(), start=1)
        if any(NO_MUTATE in part for part in (line.split("#", 1)[1:] + line.split("//", 1)[1:]))
    }


def _c_compiles(source: str, suffix: str) -> bool:
    compiler = c_compiler()
    if compiler is None:
        return True  # cannot check here; the verifier's build check will report it
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as tmp:
        tmp.write(source)
    try:
        proc = subprocess.run(
            [compiler, "-fsyntax-only", "-w", tmp.name], capture_output=True, timeout=60
        )
        return proc.returncode == 0
    finally:
        os.unlink(tmp.name)


def _viable(source: str, language: str, suffix: str) -> bool:
    if language == "python":
        try:
            compile(source, "<mutant>", "exec")
        except SyntaxError:
            return False
        return True
    if language == "c":
        return _c_compiles(source, suffix)
    return True


def generate(path: Path, rel: str, spec: EnvSpec) -> Generated:
    """Every viable, distinct mutant of ``path`` (``rel``: its path inside the implementation)."""
    original = path.read_text()
    language = language_of(path)
    if language == "python":
        edits = python_edits(original, sibling_fields(spec))
    else:
        edits = text_edits(original, sibling_fields(spec, c_names=True), rust=language == "rust")
    out = Generated(path, original)
    text = SourceText(original)
    seen = {original}
    exempt = exempt_lines(original)
    counter: dict[tuple[str, int], int] = defaultdict(int)
    for edit in sorted(edits, key=lambda e: (e.start, e.operator, e.text)):
        touched = range(text.line_of(edit.start), text.line_of(max(edit.start, edit.end - 1)) + 1)
        if exempt.intersection(touched):
            out.exempt += 1
            continue
        source = text.apply(edit)
        if source in seen:
            out.duplicates += 1
            continue
        seen.add(source)
        if not _viable(source, language, path.suffix):
            out.stillborn += 1
            continue
        line = text.line_of(edit.start)
        counter[(edit.operator, line)] += 1
        out.mutants.append(_mutant(edit, rel, line, counter[(edit.operator, line)], source))
    return out


def _mutant(edit: Edit, rel: str, line: int, k: int, source: str) -> Mutant:
    return Mutant(
        id=f"{edit.operator}:{line}:{k}",
        operator=edit.operator,
        file=rel,
        line=line,
        description=edit.description,
        source=source,
    )


SAMPLE_ORDERS = ("sorted", "shuffled")
"""How ``sample`` orders the operators it takes mutants from in turn."""


def sample(
    mutants: list[Mutant], limit: int | None, seed: int = 0, order: str = "sorted"
) -> list[Mutant]:
    """At most ``limit`` mutants, taken round-robin across operators, so rare operators are
    represented; returned in file order. Each operator's mutants are taken in a seeded order.
    The operators take turns by name (``sorted``, the default: what every campaign recorded
    before 2026-12-03 picked, so with ``limit`` below the operator count the late names,
    ``probability``, ``rng``, ``sign``, ``wrong_end``, are never drawn) or in an order shuffled
    by ``seed`` (``shuffled``; each operator's mutants still come in ``sorted``'s order)."""
    if order not in SAMPLE_ORDERS:
        raise BadInput(f"--sample-order: expected one of {', '.join(SAMPLE_ORDERS)}, got {order!r}")
    if limit is None or limit >= len(mutants):
        return list(mutants)
    rng = random.Random(seed)
    by_operator: dict[str, list[Mutant]] = defaultdict(list)
    for m in mutants:
        by_operator[m.operator].append(m)
    queues = []
    for op in sorted(by_operator):
        group = by_operator[op][:]
        rng.shuffle(group)
        queues.append(group)
    if order == "shuffled":  # its own generator: the groups' shuffles above stay as sorted's
        random.Random(f"operators {seed}").shuffle(queues)
    chosen: list[Mutant] = []
    while len(chosen) < limit and any(queues):
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop())
    position = {m.id: i for i, m in enumerate(mutants)}
    return sorted(chosen, key=lambda m: position[m.id])
