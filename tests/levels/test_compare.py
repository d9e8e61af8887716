"""The one comparison routine: ulp distances, closeness, per-env diffs, threshold-flag excuses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from envforge.backends.base import Transition
from envforge.spec import EnvSpec
from envforge.verify.compare import (
    compare_states,
    compare_transitions,
    not_float32,
    ulp_distance,
    values_close,
)

f32 = np.float32


def steps_up(x: np.float32, k: int) -> np.float32:
    for _ in range(k):
        x = np.nextafter(x, f32(np.inf))
    return x


# ---- ulp_distance ------------------------------------------------------------------------


def test_ulp_of_equal_and_adjacent_values() -> None:
    a = np.array([1.0, 1.0, -3.5, 0.0], f32)
    b = np.array([1.0, steps_up(f32(1.0), 1), steps_up(f32(-3.5), 3), 0.0], f32)
    assert ulp_distance(a, b).tolist() == [0, 1, 3, 0]
    assert ulp_distance(b, a).tolist() == [0, 1, 3, 0]


def test_ulp_across_zero_counts_both_sides() -> None:
    tiny = np.finfo(f32).smallest_subnormal
    a = np.array([0.0, -tiny, -tiny], f32)
    b = np.array([-0.0, tiny, 0.0], f32)
    assert ulp_distance(a, b).tolist() == [0, 2, 1]


def test_ulp_nan_and_inf() -> None:
    a = np.array([np.nan, np.inf, np.finfo(f32).max], f32)
    b = np.array([np.nan, np.inf, np.inf], f32)
    assert ulp_distance(a, b).tolist() == [0, 0, 1]


def test_ulp_float64_and_mixed_dtypes() -> None:
    one = np.array([1.0])
    assert ulp_distance(one, np.nextafter(one, 2.0)).tolist() == [1]
    # mixed widths compare in the wider type: float32(0.1) is far from float64 0.1 in float64 ulps
    assert ulp_distance(np.array([0.1], f32), np.array([0.1]))[0] > 1e6


FAR = float(f32(1e38))  # exactly representable, and 300 steps up stay finite


@given(
    st.floats(-FAR, FAR, width=32, allow_nan=False, allow_infinity=False),
    st.integers(0, 300),
)
def test_ulp_counts_representable_steps(x: float, k: int) -> None:
    start = f32(x)
    assert ulp_distance(np.array([start]), np.array([steps_up(start, k)]))[0] == k


# ---- values_close ------------------------------------------------------------------------


def test_values_close_exact() -> None:
    a = np.array([1.0, 0.0, np.nan, np.inf, 1.0], f32)
    b = np.array([1.0, -0.0, np.nan, np.inf, steps_up(f32(1.0), 1)], f32)
    assert values_close(a, b, 0.0, 0.0).tolist() == [True, True, True, True, False]


def test_values_close_integers_and_bools_ignore_tolerance() -> None:
    assert values_close(np.array([3, 4]), np.array([3, 5]), 10.0, 1.0).tolist() == [True, False]
    assert values_close(np.array([True]), np.array([False]), 1.0, 1.0).tolist() == [False]


def test_values_close_nan_only_matches_nan() -> None:
    a = np.array([np.nan, 1.0])
    b = np.array([1.0, np.nan])
    assert values_close(a, b, 1e9, 1.0).tolist() == [False, False]


def test_values_close_tolerance_is_relative_to_the_reference() -> None:
    assert values_close(np.array([100.0]), np.array([101.0]), 0.0, 0.01).tolist() == [True]
    assert values_close(np.array([99.0]), np.array([100.0]), 0.0, 0.01).tolist() == [False]
    assert values_close(np.array([0.0]), np.array([1e-7]), 1e-6, 0.0).tolist() == [True]
    assert values_close(np.array([0.0]), np.array([2e-6]), 1e-6, 0.0).tolist() == [False]


# ---- compare_states ------------------------------------------------------------------------


def small_spec(mode: str = "exact", termination: str | None = "after.x >= 1.0") -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "toy",
            "reference": "toy.c",
            "episode_cap": 10,
            "observation": {"shape": [1], "low": -10.0, "high": 10.0},
            "action": {"type": "discrete", "n": 2},
            "state": [
                {"name": "x", "dtype": "float32"},
                {"name": "v", "dtype": "float32", "shape": [2]},
                {"name": "n", "dtype": "int32"},
            ],
            "rng": {"mode": "sync"},
            "compare": {"mode": mode, "atol": 1e-6, "rtol": 0.0},
            "termination": termination,
        }
    )


def test_compare_states_per_env_and_field() -> None:
    spec = small_spec()
    ref = {
        "x": np.array([0.5, 0.5, 0.5], f32),
        "v": np.zeros((3, 2), f32),
        "n": np.array([1, 1, 1], np.int32),
    }
    port = {
        "x": np.array([0.5, 0.5, steps_up(f32(0.5), 2)], f32),
        "v": np.array([[0, 0], [0, 0.25], [0, 0]], f32),
        "n": np.array([1, 1, 1], np.int32),
    }
    diff = compare_states(spec, ref, port)
    assert diff.mismatch.tolist() == [False, True, True]
    assert diff.first() == 1
    assert diff.keys_at(1) == ["v"] and diff.keys_at(2) == ["x"]
    assert diff.abs_err["v"][1] == 0.25
    assert diff.ulp["x"][2] == 2
    assert "n" not in diff.ulp  # integers have no ulps
    # the tolerance spec forgives 2 ulps of 0.5 (1.2e-7) but not 0.25
    tolerant = compare_states(small_spec("tolerance"), ref, port)
    assert tolerant.mismatch.tolist() == [False, True, False]
    assert compare_states(small_spec("tolerance"), ref, port, exact=True).mismatch[2]


def test_a_period_excuses_the_side_of_the_wrap_not_leaving_the_range() -> None:
    pi = float(np.pi)
    spec = EnvSpec.model_validate(
        {
            "name": "angle",
            "reference": "toy.c",
            "episode_cap": 10,
            "observation": {"shape": [1], "low": -10.0, "high": 10.0},
            "action": {"type": "discrete", "n": 2},
            "state": [
                {"name": "theta", "dtype": "float64", "low": -pi, "high": pi, "period": 2 * pi}
            ],
            "rng": {"mode": "sync"},
            "compare": {"mode": "tolerance", "atol": 1e-6, "rtol": 0.0},
        }
    )
    ref = {"theta": np.array([pi, 0.1, 3.0 - 2 * pi, 3.5])}  # the last outside: not judged
    port = {"theta": np.array([-pi, 0.1 + 2 * pi, 3.0, 3.5 - 2 * pi])}
    diff = compare_states(spec, ref, port)
    # +pi against -pi is one angle; 0.1 + 2 pi is the same angle left unwrapped: a mismatch
    assert diff.mismatch.tolist() == [False, True, False, False]


# ---- threshold flag excuse (tolerance mode) -------------------------------------------------


def transition(x: float, terminated: bool) -> Transition:
    return Transition(
        state={
            "x": np.array([x], f32),
            "v": np.zeros((1, 2), f32),
            "n": np.array([0], np.int32),
        },
        obs=np.array([[x]], f32),
        reward=np.array([1.0 if terminated else 0.0]),
        terminated=np.array([terminated]),
        truncated=np.array([False]),
    )


BELOW_ONE = float(np.nextafter(f32(1.0), f32(0.0)))


def test_flag_flip_on_the_threshold_is_excused_in_tolerance_mode() -> None:
    """x lands on 1.0 on one side and one ulp below on the other: each flag follows from its
    own state, the states agree within tolerance, so the flip is rounding, not a bug."""
    diff = compare_transitions(
        small_spec("tolerance"), transition(1.0, True), transition(BELOW_ONE, False)
    )
    assert diff.excused.tolist() == [True]
    assert not diff.mismatch.any()


def test_flag_flip_within_tolerance_of_the_threshold_is_excused() -> None:
    """Both sides at x = 1.0 exactly, the port not terminated although the predicate is
    x >= 1.0: within tolerance of the threshold either flag is right (a float32 port compares
    with the float32 threshold, not the float64 one the predicate reads)."""
    diff = compare_transitions(
        small_spec("tolerance"), transition(1.0, True), transition(1.0, False)
    )
    assert diff.excused.tolist() == [True]


@pytest.mark.parametrize(
    ("mode", "termination", "ref", "port"),
    [
        ("exact", "after.x >= 1.0", transition(1.0, True), transition(BELOW_ONE, False)),
        ("tolerance", None, transition(1.0, True), transition(BELOW_ONE, False)),
        ("tolerance", "after.x >= 1.0", transition(2.0, True), transition(2.0, False)),
        ("tolerance", "after.x >= 1.0", transition(1.0, True), transition(0.5, False)),
    ],
    ids=["exact_mode", "no_termination_predicate", "inconsistent_port_flag", "states_differ"],
)
def test_flag_flip_is_a_mismatch_otherwise(
    mode: str, termination: str | None, ref: Transition, port: Transition
) -> None:
    """Exact mode excuses nothing; without a predicate there is nothing to check the flags by;
    a flag the predicate contradicts far from its threshold is a bug; so are states that
    differ beyond tolerance."""
    diff = compare_transitions(small_spec(mode, termination), ref, port)
    assert not diff.excused.any()
    assert diff.mismatch.tolist() == [True]
    assert "terminated" in diff.keys_at(0)


def test_a_float64_reward_is_exact_for_the_nearest_float32_only() -> None:
    # MiniGrid's reward 1 - 0.9 * t / max_steps: a float64 no float32 port can return
    spec = small_spec(termination=None)
    reward64 = np.array([1 - 0.9 * 3 / 7, 1 - 0.9 * 5 / 7, 1.0])
    nearest = reward64.astype(f32)
    state = {"x": np.zeros(3, f32), "v": np.zeros((3, 2), f32), "n": np.zeros(3, np.int32)}

    def step(reward: np.ndarray) -> Transition:
        flags = np.zeros(3, bool)
        return Transition(state, np.zeros((3, 1), f32), reward.astype(np.float64), flags, flags)

    # before: the nearest float32 "differed" from the float64 in exact mode, with no reason
    assert not compare_transitions(spec, step(reward64), step(nearest)).mismatch.any()
    off = nearest.copy()
    off[1] = np.nextafter(off[1], f32(0))  # a float32, but not the nearest one
    assert compare_transitions(spec, step(reward64), step(off)).mismatch.tolist() == [
        False,
        True,
        False,
    ]
    why = not_float32(reward64[1])
    assert why is not None and "is not representable in float32" in why
    assert not_float32(1.0) is None  # 1.0 is a float32: a difference there has another cause


def test_a_group_of_numpy_values_is_json() -> None:
    """A group's minimal input holds what the drivers returned (numpy scalars and arrays): the
    MCP server's and translate's report.json failed on an int32 action ("not JSON serializable")."""
    import json

    from envforge.verify.findings import Finding
    from envforge.verify.groups import Group

    finding = Finding(
        level=1,
        check="step.field_mismatch",
        message="m",
        fields=["x"],
        seed=np.uint32(3),
        actions=[np.int32(2)],
        state_before={"x": np.arange(3, dtype=np.int32)},
        expected={"x": np.float32(1.5)},
        actual={"x": np.float32(2.5)},
    )
    data = json.loads(json.dumps(Group("x", finding, count=np.int64(4)).to_dict()))
    assert data["minimal_input"] == {
        "seed": 3,
        "step": None,
        "state_before": {"x": [0, 1, 2]},
        "actions": [2],
    }
    assert data["count"] == 4 and data["expected"] == {"x": 1.5}
