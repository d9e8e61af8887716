"""Trip counts of a jaxpr's ``while`` loops at one input, measured: the jaxpr is evaluated one
equation at a time, and each ``while`` (also inside calls and other whiles) is run as a Python
loop over its cond and body, counting. Under ``vmap`` a while's predicate is already reduced over
the batch (the loop runs while any env's holds), so the count is the batch's longest. Loops inside a ``scan`` or a ``cond`` run as one
operation and are not counted. Called by the profile job, inside the sandbox."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np


def while_trips(closed: Any, *args: Any) -> dict[int, list[int]]:
    """``id(eqn)`` of each counted while equation of ``closed`` -> its trips, per time run."""
    counts: dict[int, list[int]] = defaultdict(list)
    _run(closed.jaxpr, closed.consts, list(args), counts)
    return dict(counts)


def _run(jaxpr: Any, consts: list[Any], args: list[Any], counts: dict[int, list[int]]) -> list:
    from jax.extend.core import Literal

    env: dict[Any, Any] = {}
    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value

    def read(var: Any) -> Any:
        return var.val if isinstance(var, Literal) else env[var]

    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        if name == "while":
            outs = _while(eqn.params, values, counts, id(eqn))
        elif name in ("pjit", "jit", "closed_call") and hasattr(eqn.params.get("jaxpr"), "consts"):
            inner = eqn.params["jaxpr"]
            outs = _run(inner.jaxpr, inner.consts, values, counts)
        else:
            params = eqn.primitive.get_bind_params(eqn.params)
            with eqn.ctx.manager:
                result = eqn.primitive.bind(*values, **params)
            outs = list(result) if eqn.primitive.multiple_results else [result]
        for var, value in zip(eqn.outvars, outs, strict=True):
            env[var] = value
    return [read(v) for v in jaxpr.outvars]


def _while(params: dict, values: list, counts: dict[int, list[int]], key: int) -> list:
    cond, body = params["cond_jaxpr"], params["body_jaxpr"]
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, body_consts, carry = values[:nc], values[nc : nc + nb], values[nc + nb :]
    trips = 0
    # a batched predicate (vmap): the loop runs while any env's holds, the body selecting
    while bool(np.any(_run(cond.jaxpr, cond.consts, [*cond_consts, *carry], counts)[0])):
        carry = _run(body.jaxpr, body.consts, [*body_consts, *carry], counts)
        trips += 1
    counts[key].append(trips)
    return carry
