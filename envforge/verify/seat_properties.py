"""Properties of several agents that the spec states and L1 checks on both sides: a zero-sum
game's rewards sum to zero over the agents at every step (but one that an illegal move ended,
under ``illegal = "terminate"``: that pays the mover alone, as PettingZoo's wrapper does).

The reference is the truth about the env, so a reference that breaks a property the spec
states is a wrong spec (bad input, one line); a port that breaks it is a finding naming the
step, the state and each agent's reward.
"""

from __future__ import annotations

import numpy as np

from envforge.backends.base import Transition, concat_states
from envforge.errors import BadInput
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.reachable import reachable_states
from envforge.verify.strategies import sample_actions, sample_states
from envforge.verify.tape import step_pair

ZERO_SUM_STATES = 1024
SUM_RTOL = 1e-6
"""Rewards that sum to zero in exact arithmetic sum to this share of their size in float32."""


def unbalanced(ctx: VerifyContext, tr: Transition) -> np.ndarray:
    """Rows whose rewards do not sum to zero over the agents (within float32 rounding: the
    comparison's tolerance says how close two sides are, not how exact the game is), an
    illegal move's end left out (every agent truncated, under ``illegal = "terminate"``)."""
    seats = ctx.spec.agents
    assert seats is not None
    rewards = np.asarray(tr.state[seats.rewards], dtype=np.float64)
    scale = np.abs(rewards).sum(axis=1)
    off = np.abs(rewards.sum(axis=1)) > SUM_RTOL * scale + 1e-12
    if seats.illegal == "terminate":
        off &= ~np.asarray(tr.state[seats.truncations]).all(axis=1)
    return np.flatnonzero(off)


def check_zero_sum(ctx: VerifyContext) -> Finding | None:
    """Both sides step from states the reference reaches (and drawn ones) with random actions;
    every step's rewards must sum to zero on each."""
    spec = ctx.spec
    if spec.agents is None or not spec.agents.zero_sum:
        return None
    rng = ctx.rng(17)
    n = ctx.count(ZERO_SUM_STATES, 256)
    reached = reachable_states(ctx, rng, n)
    drawn = sample_states(spec, rng, n)  # drawn boards hold wins a random game seldom reaches
    states = concat_states([reached, drawn]) if reached else drawn
    actions = sample_actions(spec, rng, len(next(iter(states.values()))))
    pair = step_pair(ctx, states, states, actions)
    names = spec.agents.names
    ref_rows = unbalanced(ctx, pair.ref)
    if len(ref_rows):
        i = int(ref_rows[0])
        got = pair.ref.state[spec.agents.rewards][i].tolist()
        raise BadInput(
            f"{spec.name}: [agents] zero_sum = true, but the reference's rewards of one step "
            f"sum to {sum(got)} ({dict(zip(names, got, strict=True))}): the spec is wrong"
        )
    port_rows = unbalanced(ctx, pair.port)
    if not len(port_rows):
        return None
    i = int(port_rows[0])
    got = pair.port.state[spec.agents.rewards][i].tolist()
    return Finding(
        level=1,
        check="property.zero_sum",
        message=f"the port's rewards of one step sum to {sum(got)}, not 0 (the spec says the "
        f"game is zero-sum): " + ", ".join(f"{a} {r}" for a, r in zip(names, got, strict=True)),
        fields=[spec.agents.rewards],
        step=0,
        actions=[to_jsonable(actions[i])],
        state_before=to_jsonable({k: v[i] for k, v in states.items()}),
        actual={spec.agents.rewards: got},
        extra={"agents": list(names)},
    )
