"""JAX port of Pong against a scripted opponent.

Reference: ``references/pong/pong.c`` (envforge's C reference). Variable names follow the C
source; each physics frame is written in the same operation order so that, with XLA's FMA
contraction disabled (``XLA_FLAGS=--xla_cpu_max_isa=SSE4_2``), float32 results match the C
build (``-O2 -ffp-contract=off``) bit for bit. Randomness replicates the reference's
xorshift32 generator, carried in the state as ``rng``.

Single-env, pure functions; the envforge JAX backend vmaps and jits them. What XLA:CPU needs to
run them fast is in ``envforge/kit/speed_layer.py``, called on the lines marked ``speed layer:``;
it changes no bit, and ``ENVFORGE_SPEED_LAYER=off`` switches it off.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envforge.kit import speed_layer

f32 = np.float32

FRAMESKIP = 4  # physics frames per agent step (PONG_FRAMESKIP)
WIDTH = f32(640.0)
HEIGHT = f32(480.0)
PADDLE_W = f32(10.0)
PADDLE_H = f32(80.0)
PADDLE_MARGIN = f32(20.0)
BALL = f32(10.0)
PADDLE_SPEED = f32(8.0)
OPPONENT_SPEED = f32(5.0)
BALL_SPEED_X = f32(8.0)
SERVE_MAX_VY = f32(4.0)
MAX_VY = f32(10.0)
SPEEDUP = f32(1.125)
DEFLECT = f32(0.125)
RETURN_REWARD = f32(0.1)
WIN_SCORE = 21
MAX_TICKS = 10000

LEFT_X = PADDLE_MARGIN
RIGHT_X = WIDTH - PADDLE_MARGIN - PADDLE_W
HALF = f32(0.5)
INV_2_24 = f32(1.0) / f32(16777216.0)


class EnvState(NamedTuple):
    paddle_yl: jax.Array
    paddle_yr: jax.Array
    ball_x: jax.Array
    ball_y: jax.Array
    ball_vx: jax.Array
    ball_vy: jax.Array
    score_l: jax.Array
    score_r: jax.Array
    tick: jax.Array
    rng: jax.Array


# ---- randomness: xorshift32, exactly as pong.c ---------------------------------------------


def next_rng(x: jax.Array) -> jax.Array:
    x = x ^ (x << 13)
    x = x ^ (x >> 17)
    return x ^ (x << 5)


def uniform01(rng: jax.Array) -> tuple[jax.Array, jax.Array]:
    rng = next_rng(rng)
    return rng, (rng >> 8).astype(jnp.float32) * INV_2_24


def seed_rng(seed: jax.Array) -> jax.Array:
    x = seed.astype(jnp.uint32) * jnp.uint32(747796405) + jnp.uint32(2891336453)
    x = ((x >> ((x >> 28) + jnp.uint32(4))) ^ x) * jnp.uint32(277803737)
    x = (x >> 22) ^ x
    return jnp.where(x == 0, jnp.uint32(1), x)


def serve(state: EnvState, direction: jax.Array) -> EnvState:
    rng, u = uniform01(state.rng)
    return state._replace(
        ball_x=(WIDTH - BALL) * HALF,
        ball_y=(HEIGHT - BALL) * HALF,
        ball_vx=BALL_SPEED_X * direction,
        ball_vy=(u * f32(2.0) - f32(1.0)) * SERVE_MAX_VY,
        rng=rng,
    )


def reset(seed: jax.Array) -> EnvState:
    zero = jnp.int32(0)
    state = EnvState(
        paddle_yl=(HEIGHT - PADDLE_H) * HALF + jnp.zeros((), jnp.float32),
        paddle_yr=(HEIGHT - PADDLE_H) * HALF + jnp.zeros((), jnp.float32),
        ball_x=jnp.zeros((), jnp.float32),
        ball_y=jnp.zeros((), jnp.float32),
        ball_vx=jnp.zeros((), jnp.float32),
        ball_vy=jnp.zeros((), jnp.float32),
        score_l=zero,
        score_r=zero,
        tick=zero,
        rng=seed_rng(seed),
    )
    rng, u = uniform01(state.rng)
    direction = jnp.where(u < HALF, f32(-1.0), f32(1.0))
    return serve(state._replace(rng=rng), direction)


# ---- physics --------------------------------------------------------------------------------


def bounce_vy(vy: jax.Array, ball_y: jax.Array, paddle_y: jax.Array) -> jax.Array:
    offset = (ball_y + BALL * HALF) - (paddle_y + PADDLE_H * HALF)
    return jnp.clip((vy + offset * DEFLECT) * SPEEDUP, -MAX_VY, MAX_VY)


def reflect(ball_y: jax.Array, below: jax.Array, above: jax.Array) -> jax.Array:
    """Walls: reflect the overshoot."""
    return jnp.where(below, -ball_y, jnp.where(above, f32(2.0) * (HEIGHT - BALL) - ball_y, ball_y))


def place_returned(ball_x: jax.Array, hit_r: jax.Array, hit_l: jax.Array) -> jax.Array:
    """A returned ball is put back in front of the paddle that hit it."""
    return jnp.where(hit_r, RIGHT_X - BALL, jnp.where(hit_l, LEFT_X + PADDLE_W, ball_x))


def frame(state: EnvState, action: jax.Array) -> tuple[EnvState, jax.Array, jax.Array]:
    """One physics frame: (next state, frame reward, point scored)."""
    move = jnp.where(action == 1, -PADDLE_SPEED, jnp.where(action == 2, PADDLE_SPEED, f32(0.0)))
    paddle_yr = jnp.clip(state.paddle_yr + move, f32(0.0), HEIGHT - PADDLE_H)

    target = state.ball_y - (PADDLE_H - BALL) * HALF  # centre on the ball
    chase = jnp.clip(target - state.paddle_yl, -OPPONENT_SPEED, OPPONENT_SPEED)
    paddle_yl = jnp.clip(state.paddle_yl + chase, f32(0.0), HEIGHT - PADDLE_H)

    ball_x = state.ball_x + state.ball_vx
    ball_y = state.ball_y + state.ball_vy
    moved_x, moved_y = ball_x, ball_y  # the speed layer places the ball again from these

    # walls: reflect the overshoot
    below = ball_y < f32(0.0)
    above = ~below & (ball_y > HEIGHT - BALL)
    ball_y = reflect(ball_y, below, above)

    # paddles: only a ball moving towards a paddle and overlapping it bounces
    overlaps_r = (
        (ball_x + BALL >= RIGHT_X)
        & (ball_x <= RIGHT_X + PADDLE_W)
        & (ball_y + BALL >= paddle_yr)
        & (ball_y <= paddle_yr + PADDLE_H)
    )
    overlaps_l = (
        (ball_x <= LEFT_X + PADDLE_W)
        & (ball_x + BALL >= LEFT_X)
        & (ball_y + BALL >= paddle_yl)
        & (ball_y <= paddle_yl + PADDLE_H)
    )
    hit_r = (state.ball_vx > f32(0.0)) & overlaps_r
    hit_l = ~hit_r & (state.ball_vx < f32(0.0)) & overlaps_l
    ball_x = place_returned(ball_x, hit_r, hit_l)

    # points: the ball left the field
    scored_r = ball_x + BALL < f32(0.0)
    scored_l = ~scored_r & (ball_x > WIDTH)

    # speed layer: the decisions settled once for the batch, the ball placed again from them
    # (the same values; with ENVFORGE_SPEED_LAYER=off the flags pass through unchanged)
    below, above, hit_r, hit_l, scored_r, scored_l = speed_layer.settle_flags(
        below, above, hit_r, hit_l, scored_r, scored_l
    )
    ball_y = reflect(moved_y, below, above)
    ball_x = place_returned(moved_x, hit_r, hit_l)

    ball_vy = jnp.where(below | above, -state.ball_vy, state.ball_vy)
    ball_vx = jnp.where(hit_r | hit_l, -state.ball_vx, state.ball_vx)
    ball_vy = jnp.where(
        hit_r,
        bounce_vy(ball_vy, ball_y, paddle_yr),
        jnp.where(hit_l, bounce_vy(ball_vy, ball_y, paddle_yl), ball_vy),
    )
    reward = jnp.where(hit_r, f32(0.0) + RETURN_REWARD, f32(0.0))
    point = scored_r | scored_l
    reward = jnp.where(scored_r, reward + f32(1.0), jnp.where(scored_l, reward - f32(1.0), reward))
    moved = state._replace(
        paddle_yl=paddle_yl,
        paddle_yr=paddle_yr,
        ball_x=ball_x,
        ball_y=ball_y,
        ball_vx=ball_vx,
        ball_vy=ball_vy,
        score_l=state.score_l + scored_l.astype(jnp.int32),
        score_r=state.score_r + scored_r.astype(jnp.int32),
    )
    served = serve(moved, jnp.where(scored_r, f32(1.0), f32(-1.0)))
    next_state = jax.tree_util.tree_map(lambda s, m: jnp.where(point, s, m), served, moved)
    return next_state, reward, point


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    total = f32(0.0) + jnp.zeros((), jnp.float32)
    point = jnp.zeros((), bool)
    # a point ends the agent step early: later frames of the skip are not simulated
    for _ in range(FRAMESKIP):
        after, reward, scored = frame(state, action)
        state = jax.tree_util.tree_map(partial(jnp.where, point), state, after)
        total = jnp.where(point, total, total + reward)
        point = point | scored
        state = speed_layer.settle_floats(state)  # speed layer: stored once per frame
    state = state._replace(tick=state.tick + 1)
    terminated = (state.score_l >= WIN_SCORE) | (state.score_r >= WIN_SCORE)
    truncated = ~terminated & (state.tick >= MAX_TICKS)
    # speed layer: an auto-reset loop's where(terminated | truncated, fresh, next) would redo
    # the scores and tick in each state field's fusion
    terminated, truncated = speed_layer.settle_flags(terminated, truncated)
    return state, observe(state), total, terminated, truncated


def observe(state: EnvState) -> jax.Array:
    return jnp.stack(
        [
            (state.paddle_yr + PADDLE_H * HALF) * (f32(1.0) / HEIGHT),
            (state.paddle_yl + PADDLE_H * HALF) * (f32(1.0) / HEIGHT),
            (state.ball_x + BALL * HALF) * (f32(1.0) / WIDTH),
            (state.ball_y + BALL * HALF) * (f32(1.0) / HEIGHT),
            state.ball_vx * (f32(1.0) / BALL_SPEED_X),
            state.ball_vy * (f32(1.0) / MAX_VY),
            state.score_l.astype(jnp.float32) * (f32(1.0) / f32(WIN_SCORE)),
            state.score_r.astype(jnp.float32) * (f32(1.0) / f32(WIN_SCORE)),
        ]
    )


# ---- canonical state ------------------------------------------------------------------------


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(**{name: fields[name] for name in EnvState._fields})
