"""Seeking the spec's rare events beyond the candidates (distribution mode, L1).

Coverage steering (``distribution_states.steer``) steps each candidate once; an event that
fires in none of those steps gets no witness, so no tested state ever shows it and a change in
what happens there goes unseen (FrozenLake: 205 candidates at ``--scale 0.2``, none of whose
single steps reached the goal, so a port paying 1.1 for the goal verified equivalent). Here,
for every spec ``[[event]]`` that fewer than ``RARE_WITNESSES`` candidate steps fired (and under
``RARE_SHARE`` of them), the reference steps ``SEEK_STEPS`` (times ``--scale``) more
(state, action) pairs once each with fresh draws: half pool states (each with the action its
policy took), half states drawn afresh in the spec's ranges (random actions). The first pairs
that fire such an event join the candidates as its witnesses (``Steering.sought``), and the
selection tests them like the candidates that fired a rare event (``RARE_FACTOR`` times the
samples).
"""

from __future__ import annotations

import numpy as np

from envforge.backends.base import batch_size, concat_states
from envforge.errors import BadInput
from envforge.verify.context import VerifyContext
from envforge.verify.distribution import event_columns
from envforge.verify.distribution_states import RARE_SHARE, RARE_WITNESSES, Pool, Steering
from envforge.verify.strategies import sample_actions, sample_states

SEEK_STEPS = 4096
"""Reference steps (times ``--scale``, at least ``SEEK_MIN``) spent seeking unseen events."""
SEEK_MIN = 128
SEEK_CHUNK = 256


def wanted(ctx: VerifyContext, steering: Steering) -> list[str]:
    """The spec events the candidates' steps fired too seldom to have their witnesses."""
    return [
        e.name
        for e in ctx.spec.event
        if len(steering.events.get(e.name, [])) < RARE_WITNESSES
        and steering.event_share(e.name) < RARE_SHARE
    ]


def _pairs(ctx: VerifyContext, pool: Pool, rng: np.random.Generator, budget: int) -> list[Pool]:
    parts = [pool.take(np.sort(rng.permutation(len(pool))[: budget // 2]))]
    try:
        drawn = sample_states(ctx.spec, rng, budget - len(parts[0]))
    except BadInput:
        return parts  # a valid rule that ranges rarely satisfy: pool states only
    m = batch_size(drawn)
    acts = sample_actions(ctx.spec, rng, m)
    parts.append(Pool(drawn, acts, np.full(m, len(pool.names) - 1), np.full(m, -1), pool.names))
    return parts


def seek_events(
    ctx: VerifyContext, pool: Pool, cand: Pool, steering: Steering, rng: np.random.Generator
) -> Pool:
    """``cand`` with the witnesses found for the events ``wanted`` names appended (their rows
    recorded in ``steering.sought``)."""
    names = wanted(ctx, steering)
    if not names:
        return cand
    need = {e: RARE_WITNESSES - len(steering.events.get(e, [])) for e in names}
    found: list[Pool] = []
    for part in _pairs(ctx, pool, rng, ctx.count(SEEK_STEPS, SEEK_MIN)):
        for start in range(0, len(part), SEEK_CHUNK):
            if not any(need.values()):
                break
            chunk = part.take(np.arange(start, min(start + SEEK_CHUNK, len(part))))
            seeds = rng.integers(0, 2**63, size=len(chunk), dtype=np.uint64)
            tr, _ = ctx.ref.step_draws(chunk.states, chunk.actions, seeds, None)
            steering.seek_steps += len(chunk)
            hits = event_columns(ctx, chunk.states, chunk.actions, tr)
            for e in names:
                for r in np.flatnonzero(hits[f"event {e}"] > 0)[: need[e]]:
                    at = len(cand) + len(found)
                    found.append(chunk.take(np.array([r])))
                    steering.sought.setdefault(e, []).append(at)
                    need[e] -= 1
    if not found:
        return cand
    parts = [cand, *found]
    return Pool(
        concat_states([p.states for p in parts]),
        np.concatenate([p.actions for p in parts]),
        np.concatenate([p.source for p in parts]),
        np.concatenate([p.t for p in parts]),
        cand.names,
    )
