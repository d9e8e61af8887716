"""Boundary search (verify/boundaries.py) on the pong reference: bisection lands on the exact
float where a branch of pong.c flips, including a smaller jump beside a larger one."""

from __future__ import annotations

import numpy as np
from conftest import PONG_SPEC

from envforge.backends.recipe import build_driver, reference_recipe
from envforge.spec import load_spec
from envforge.verify.boundaries import Lines, jump_states, ordered_keys

SPEC = load_spec(PONG_SPEC)


def line_along_ball_x(lo: float, hi: float) -> Lines:
    """A ball moving right, level with the agent's paddle, varied along ball_x."""
    f = np.float32
    base = {
        "paddle_yl": np.array([200.0], f),
        "paddle_yr": np.array([100.0], f),
        "ball_x": np.array([lo], f),
        "ball_y": np.array([130.0], f),
        "ball_vx": np.array([8.0], f),
        "ball_vy": np.array([0.0], f),
        "score_l": np.array([0], np.int32),
        "score_r": np.array([0], np.int32),
        "tick": np.array([10], np.int32),
        "rng": np.array([12345], np.uint32),
    }
    keys = ordered_keys(np.array([lo, hi], f))
    return Lines(base, np.array([0], np.int32), ["ball_x"], np.array([0]), keys[:1], keys[1:])


def found_ball_x(jumps: int) -> set[tuple[float, float]]:
    driver = build_driver(reference_recipe(SPEC, True))
    states, _ = jump_states(SPEC, driver, line_along_ball_x(560.0, 639.0), jumps)
    x = states["ball_x"]
    half = len(x) // 2
    return {(float(a), float(b)) for a, b in zip(x[:half], x[half:], strict=True)}


def test_each_pair_is_two_adjacent_floats() -> None:
    for a, b in found_ball_x(3):
        assert b == np.nextafter(np.float32(a), np.float32(np.inf))


def test_the_far_edge_of_the_paddle_is_found_beside_the_larger_jumps() -> None:
    """In the first frame the ball bounces off the agent's paddle while ball_x + 8 <= 620
    (RIGHT_X + PADDLE_W), i.e. up to ball_x = 612 exactly. On the line 560..639 bisection
    towards the largest change alone settles on the jump at 568 (a bounce in the fourth
    frame); the pass right of that jump finds 612."""
    far_edge = (612.0, float(np.nextafter(np.float32(612.0), np.float32(np.inf))))
    assert far_edge in found_ball_x(3)
    assert far_edge not in found_ball_x(1)
