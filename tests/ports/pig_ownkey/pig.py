"""Pig against a hold-at-20 opponent in JAX, drawing from its own ``jax.random`` key the way
gymnax-style libraries do: not through ``envforge.rng.jax_draws.Draws``, so no tape can be
replayed to it (the step's key is split three ways: ``randint`` for the agent's die, ``uniform``
for the opponent's greed, 13 ``randint`` dice for the opponent's turn drawn at once and used as
far as it rolls; the reference asks ``pig_draw`` one number at a time, only when needed). It can
only be verified in distribution mode (``env.toml`` beside it: ``[rng] step = "distribution"``).
Written by hand (PROVENANCE.md) from ``generated/pig/jax/pig.py``: the same
rules, another generator.

Two players race to 50 points. The agent's step is one decision (0 roll, 1 hold); a 1 loses
the turn total and ends the turn; a roll that brings the agent to 50 banks it and wins. When
the agent's turn ends without a win, the opponent plays its whole turn in the same step: greedy
with probability 1/4 (holds at 25, else 20), and holds as soon as its total would win.

``step_with_draws`` is the verifier's entry point: it takes the key the driver seeds
(``draws.key``) and returns ``draws`` untouched (nothing is logged).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # the observation is divided in float64, as C rounds

GOAL = 50
HOLD_AT = 20
GREEDY_AT = 25
GREEDY = 0.25
MAX_STEPS = 100
OPPONENT_ROLLS = 13
"""Most rolls of one opponent turn: a greedy opponent rolling only 2s reaches 25 on the 13th."""


class EnvState(NamedTuple):
    me: jax.Array  # int32: the agent's banked points
    opp: jax.Array  # int32: the opponent's banked points
    turn: jax.Array  # int32: the agent's turn total
    last: jax.Array  # int32: the agent's roll in the last step (0: none)
    steps: jax.Array  # int32: agent decisions this episode
    key: jax.Array  # the port's own generator (training only; not canonical)


def observe(state: EnvState) -> jax.Array:
    """Divided in float64 and rounded once to float32 (C's correctly rounded float division)."""
    values = jnp.stack([state.me, state.opp, state.turn, state.last]).astype(jnp.float64)
    scale = jnp.asarray([GOAL, GOAL, GOAL, 6.0], jnp.float64)
    return (values / scale).astype(jnp.float32)


def reset(seed: jax.Array) -> EnvState:
    """Every game starts at 0 : 0; the seed only seeds the port's own dice."""
    zero = jnp.int32(0)
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    return EnvState(zero, zero, zero, zero, zero, key)


def _opponent_total(opp: jax.Array, key: jax.Array) -> jax.Array:
    """The opponent's whole turn from ``opp`` points: what it banks (0 when it rolls a 1)."""
    k_greed, k_dice = jax.random.split(key)
    hold = jnp.where(jax.random.uniform(k_greed) < GREEDY, GREEDY_AT, HOLD_AT)
    dice = jax.random.randint(k_dice, (OPPONENT_ROLLS,), 1, 7).astype(jnp.int32)

    def roll(carry: tuple[jax.Array, jax.Array], die: jax.Array) -> tuple:
        total, going = carry
        total = jnp.where(going, jnp.where(die == 1, 0, total + die), total)
        going = going & (die != 1) & (total < hold) & (opp + total < GOAL)
        return (total, going), None

    (total, _), _ = jax.lax.scan(roll, (jnp.int32(0), jnp.bool_(True)), dice)
    return total


def _step(state: EnvState, action: jax.Array, key: jax.Array) -> tuple:
    k_die, k_opp = jax.random.split(key)
    rolls = jnp.asarray(action) == 0
    die = jax.random.randint(k_die, (), 1, 7).astype(jnp.int32)
    pigged = rolls & (die == 1)
    turn = jnp.where(rolls, jnp.where(die == 1, 0, state.turn + die), state.turn)
    last = jnp.where(rolls, die, 0).astype(jnp.int32)
    turn_over = ~rolls | pigged
    bank = turn_over | (state.me + turn >= GOAL)
    me = jnp.where(bank, state.me + turn, state.me)
    turn = jnp.where(bank, 0, turn)
    won = me >= GOAL
    plays = turn_over & ~won
    opp = jnp.where(plays, state.opp + _opponent_total(state.opp, k_opp), state.opp)
    lost = plays & (opp >= GOAL)
    reward = jnp.where(won, 1.0, jnp.where(lost, -1.0, 0.0)).astype(jnp.float32)
    terminated = won | lost
    steps = state.steps + 1
    truncated = ~terminated & (steps >= MAX_STEPS)
    new = EnvState(
        me.astype(jnp.int32),
        opp.astype(jnp.int32),
        turn.astype(jnp.int32),
        last,
        steps.astype(jnp.int32),
        state.key,
    )
    return new, observe(new), reward, terminated, truncated


def step_with_draws(state: EnvState, action: jax.Array, draws: Any) -> tuple:
    """The verifier's call: the port's own draws from the key the driver seeded."""
    return (*_step(state, action, draws.key), draws)


def step(state: EnvState, action: jax.Array) -> tuple:
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated = _step(state, action, sub)
    return new._replace(key=key), obs, reward, terminated, truncated


CANONICAL = ("me", "opp", "turn", "last", "steps")


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {name: getattr(state, name) for name in CANONICAL}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    me, opp, turn, last, steps = (jnp.asarray(fields[k]).astype(jnp.int32) for k in CANONICAL)
    seed = (me * 1000003 + opp * 10007 + turn * 101 + steps).astype(jnp.uint32)
    return EnvState(me, opp, turn, last, steps, jax.random.PRNGKey(seed))
