"""States the levels start from besides drawn ones: those the reference reaches from its own
resets under random actions (uniform draws rarely land where events happen, a ball meeting a
paddle; trajectories do). L1 steps from them; the distribution checks of L1 and L2 start there.
"""

from __future__ import annotations

import numpy as np

from envforge.backends.base import State, batch_size, concat_states, take_state
from envforge.verify.context import VerifyContext
from envforge.verify.strategies import sample_actions, sample_states

REACHABLE_ENVS = 64
REACHABLE_HORIZON = 256


def reachable_states(ctx: VerifyContext, rng: np.random.Generator, n: int) -> State:
    """Up to ``n`` non-terminal states the reference reaches from resets under random actions.
    Uniform draws rarely land where events happen (a ball meeting a paddle); trajectories do."""
    spec = ctx.spec
    seeds = rng.integers(0, 2**32, size=min(REACHABLE_ENVS, n), dtype=np.uint64)
    state = ctx.ref.reset(seeds.astype(np.uint32))
    pool: list[State] = []
    for _ in range(REACHABLE_HORIZON):
        tr = ctx.ref.step(state, sample_actions(spec, rng, batch_size(state)))
        alive = ~(tr.terminated | tr.truncated)
        if not alive.any():
            break
        state = take_state(tr.state, alive)
        pool.append(state)
    if not pool:
        return {}
    states = concat_states(pool)
    total = batch_size(states)
    return take_state(states, np.sort(rng.choice(total, size=min(n, total), replace=False)))


def start_states(ctx: VerifyContext, salt: int, n: int) -> State:
    """``n`` states for the distribution checks: along the reference's own trajectories, or
    drawn from the spec's ranges when those end at once."""
    rng = ctx.rng(salt)
    states = reachable_states(ctx, rng, n)
    return states if states else sample_states(ctx.spec, rng, n)
