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
from typing import NamedTuple

import numpy as np

from envforge.backends.base import State
from envforge.spec import EnvSpec
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.stats import chi_square_test


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


class Invalid(NamedTuple):
    """Port resets breaking the ``valid`` rule more often than the reference's."""

    row: int
    """The first such row of the port's resets."""
    how: str
    """How the reference's resets compare."""
    p_value: float | None
    """The chi-square p-value, where the reference's break it too."""
    ref_share: float
    port_share: float
    """The shares of each side's resets that satisfy the rule."""
    broken: int
    """How many of the port's resets break it."""
    clause: str
    """The rule's first term that ``row`` breaks."""
    fields: list[str]
    """The state fields that term reads."""


def invalid_first(spec: EnvSpec, ref: State, port: State) -> Invalid | None:
    """Where ``port``'s resets break the ``valid`` rule more often than ``ref``'s; None when
    they do not (or there is no rule)."""
    if spec.valid is None:
        return None
    ok_ref, ok_port = spec.valid_mask(ref), spec.valid_mask(port)
    bad = np.flatnonzero(~ok_port)
    if len(bad) == 0:
        return None
    n, p = len(ok_ref), None
    if ok_ref.all():
        how = f"every one of the reference's {n} resets satisfies it"
    else:
        table = np.array([[ok_ref.sum(), n - ok_ref.sum()], [ok_port.sum(), len(bad)]])
        p, _ = chi_square_test(table)
        if p >= spec.verify.alpha:
            return None
        how = f"the reference's break it at {n - int(ok_ref.sum())} of {n} (chi-square p={p:.2g})"
    row = int(bad[0])
    clause = broken_clause(spec, port, row)
    shares = float(ok_ref.mean()), float(ok_port.mean())
    return Invalid(row, how, p, *shares, len(bad), clause, fields_read(spec, clause))


def check(ctx: VerifyContext, seeds: np.ndarray, ref: State, port: State) -> Finding | None:
    spec = ctx.spec
    found = invalid_first(spec, ref, port)
    if found is None:
        return None
    i, fields = found.row, found.fields
    ref_lines, port_lines = ctx.localize(fields, "reset")
    return Finding(
        level=1,
        check="reset.valid",
        message=f"the port's reset gives states the spec's valid rule rejects at "
        f"{found.broken} of {len(seeds)} seeds (first seed {int(seeds[i])}, which "
        f"breaks `{found.clause}`); {found.how}",
        fields=fields,
        seed=int(seeds[i]),
        step=0,
        expected={"valid_share": found.ref_share},
        actual={"valid_share": found.port_share, **to_jsonable({k: port[k][i] for k in fields})},
        error={} if found.p_value is None else {"p_value": found.p_value},
        reference_lines=ref_lines,
        port_lines=port_lines,
    )
