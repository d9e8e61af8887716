"""Random resets and the spec's ``valid`` rule (sync mode, L1): are the port's starts states
the reference can be in?

The reset distribution test compares each field element on its own, so a port whose reset is
right field by field and wrong jointly passes it: UNO's port choosing a random colour for a
first card that is not wild (the colour is uniform either way, but no longer the card's own)
did, in a campaign (2026-12-06). The spec's ``valid`` rule says which states the reference can
be in; a reset that breaks it is such a joint error. So the rows each side's resets satisfy
are compared: where every reference reset satisfies it, one port reset that does not is the
finding (its seed and state); where some reference resets break it too, the two shares are
compared with a 2 x 2 chi-square at the spec's ``alpha``.
"""

from __future__ import annotations

import re

import numpy as np

from envforge.backends.base import State
from envforge.spec import EnvSpec
from envforge.stats import chi_square_test
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable


def clauses(source: str) -> list[str]:
    """The rule's top-level ``&`` terms (one term: the whole rule)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(source):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "&" and depth == 0:
            out.append(source[start:i])
            start = i + 1
    out.append(source[start:])
    return [" ".join(c.split()) for c in out if c.strip()]


def fields_read(spec: EnvSpec, source: str) -> list[str]:
    """The state fields ``source`` reads, in the spec's order."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    return [name for name in spec.field_names if name in words]


def broken_clause(spec: EnvSpec, state: State, row: int) -> str:
    """The first term of the rule that row ``row`` of ``state`` breaks."""
    one = {k: v[row : row + 1] for k, v in state.items()}
    for clause in clauses(spec.valid or ""):
        if not spec.model_copy(update={"valid": clause}).valid_mask(one)[0]:
            return clause
    return " ".join((spec.valid or "").split())


def invalid_first(spec: EnvSpec, ref: State, port: State) -> tuple[int, str, float | None] | None:
    """Where ``port``'s resets break the ``valid`` rule more often than ``ref``'s: (its first
    such row, how the reference compares, the chi-square p-value where one was needed); None
    when they do not (or there is no rule)."""
    if spec.valid is None:
        return None
    ok_ref, ok_port = spec.valid_mask(ref), spec.valid_mask(port)
    bad = np.flatnonzero(~ok_port)
    if len(bad) == 0:
        return None
    n = len(ok_ref)
    if ok_ref.all():
        return int(bad[0]), f"every one of the reference's {n} resets satisfies it", None
    table = np.array([[ok_ref.sum(), n - ok_ref.sum()], [ok_port.sum(), len(bad)]])
    p, _ = chi_square_test(table)
    if p >= spec.verify.alpha:
        return None
    how = f"the reference's break it at {n - int(ok_ref.sum())} of {n} (chi-square p={p:.2g})"
    return int(bad[0]), how, p


def check(ctx: VerifyContext, seeds: np.ndarray, ref: State, port: State) -> Finding | None:
    spec = ctx.spec
    found = invalid_first(spec, ref, port)
    if found is None:
        return None
    i, how, p = found
    ok_ref, ok_port = spec.valid_mask(ref), spec.valid_mask(port)
    clause = broken_clause(spec, port, i)
    fields = fields_read(spec, clause)
    ref_lines, port_lines = ctx.localize(fields)
    return Finding(
        level=1,
        check="reset.valid",
        message=f"the port's reset gives states the spec's valid rule rejects at "
        f"{int((~ok_port).sum())} of {len(seeds)} seeds (first seed {int(seeds[i])}, which "
        f"breaks `{clause}`); {how}",
        fields=fields,
        seed=int(seeds[i]),
        step=0,
        expected={"valid_share": float(ok_ref.mean())},
        actual={
            "valid_share": float(ok_port.mean()),
            **to_jsonable({k: port[k][i] for k in fields}),
        },
        error={} if p is None else {"p_value": p},
        reference_lines=ref_lines,
        port_lines=port_lines,
    )
