"""Pig against a hold-at-20 opponent in JAX, ported by hand from ``references/pig/pig.c``.

The reference rolls every die through envforge's draw hook (``pig_draw``), so this port takes
the same numbers through ``envforge.rng.jax_draws.Draws``, in the reference's order: the
agent's roll (``integers[1, 7)``, only when it rolls), then, when its turn ends without a win,
the opponent's greed (``random()``) and its rolls, at most ``OPPONENT_ROLLS`` (each asked with
``when=`` while the opponent is still rolling, as the reference's loop asks them).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from envforge.kit import Draws

jax.config.update("jax_enable_x64", True)  # the greed draw is compared in double, as in C

GOAL = 50
HOLD_AT = 20
GREEDY_AT = 25
GREEDY = 0.25
MAX_STEPS = 100
OPPONENT_ROLLS = 13
"""Most rolls of one opponent turn: a greedy opponent rolling only 2s reaches 25 on the 13th."""
TAPE = 1 + 1 + OPPONENT_ROLLS


class EnvState(NamedTuple):
    me: jax.Array  # int32: the agent's banked points
    opp: jax.Array  # int32: the opponent's banked points
    turn: jax.Array  # int32: the agent's turn total
    last: jax.Array  # int32: the agent's roll in the last step (0: none)
    steps: jax.Array  # int32: agent decisions this episode
    key: jax.Array  # the port's own generator (training only; not canonical)


def observe(state: EnvState) -> jax.Array:
    """C divides in float32, correctly rounded; XLA turns a float32 division by a constant into
    a product with its reciprocal (0.1 came out as 0.099999994), so divide in float64 and round
    once to float32."""
    values = jnp.stack([state.me, state.opp, state.turn, state.last]).astype(jnp.float64)
    scale = jnp.asarray([GOAL, GOAL, GOAL, 6.0], jnp.float64)
    return (values / scale).astype(jnp.float32)


def reset(seed: jax.Array) -> EnvState:
    """Every game starts at 0 : 0; the seed only seeds the port's own dice for training."""
    zero = jnp.int32(0)
    key = jax.random.PRNGKey(jnp.asarray(seed).astype(jnp.uint32))
    return EnvState(zero, zero, zero, zero, zero, key)


def step_with_draws(
    state: EnvState, action: jax.Array, draws: Draws
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array, Draws]:
    rolls = action == 0
    die, draws = draws.integers(1, 7, when=rolls)
    pigged = rolls & (die == 1)
    turn = jnp.where(rolls, jnp.where(die == 1, 0, state.turn + die), state.turn)
    last = jnp.where(rolls, die, 0).astype(jnp.int32)
    turn_over = ~rolls | pigged
    bank = turn_over | (state.me + turn >= GOAL)
    me = jnp.where(bank, state.me + turn, state.me)
    turn = jnp.where(bank, 0, turn)
    won = me >= GOAL
    plays = turn_over & ~won
    u, draws = draws.random(when=plays)
    hold = jnp.where(u < GREEDY, GREEDY_AT, HOLD_AT)

    def opponent_roll(
        _: int, carry: tuple[jax.Array, jax.Array, Draws]
    ) -> tuple[jax.Array, jax.Array, Draws]:
        total, going, draws = carry
        die, draws = draws.integers(1, 7, when=going)
        total = jnp.where(going, jnp.where(die == 1, 0, total + die), total)
        going = going & (die != 1) & (total < hold) & (state.opp + total < GOAL)
        return total, going, draws

    total, _, draws = jax.lax.fori_loop(
        0, OPPONENT_ROLLS, opponent_roll, (jnp.int32(0), plays, draws)
    )
    opp = jnp.where(plays, state.opp + total, state.opp)
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
    return new, observe(new), reward, terminated, truncated, draws


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Training: the dice come from the key in the state."""
    key, sub = jax.random.split(state.key)
    new, obs, reward, terminated, truncated, _ = step_with_draws(
        state, action, Draws.from_key(sub, TAPE)
    )
    return new._replace(key=key), obs, reward, terminated, truncated


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return {
        "me": state.me,
        "opp": state.opp,
        "turn": state.turn,
        "last": state.last,
        "steps": state.steps,
    }


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    me, opp, turn, last, steps = (
        jnp.asarray(fields[k]).astype(jnp.int32) for k in ("me", "opp", "turn", "last", "steps")
    )
    seed = (me * 1000003 + opp * 10007 + turn * 101 + steps).astype(jnp.uint32)
    return EnvState(me, opp, turn, last, steps, jax.random.PRNGKey(seed))
