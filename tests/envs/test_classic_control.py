"""Gymnasium's classic-control envs (through the gymnasium driver) against their JAX ports."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from envforge.backends.base import Driver, State, Transition, check_transition, take_state
from envforge.backends.gymnasium import GymnasiumDriver
from envforge.backends.python import PythonDriver
from envforge.backends.recipe import build_driver, port_recipe, reference_recipe
from envforge.errors import BadInput
from envforge.spec import EnvSpec, load_spec
from envforge.verify.compare import compare_transitions
from envforge.verify.policies import ScriptedPolicy, random_actions
from envforge.verify.strategies import sample_states

REPO = Path(__file__).resolve().parents[2]
ENVS = ["cartpole", "acrobot", "mountaincar", "mountaincar_continuous", "pendulum"]

# (env, policy) -> {event: fraction of episodes that must see it on the reference}
RARE_EVENTS = {
    ("cartpole", "balance"): {"timeout": 1.0},
    ("cartpole", "drive_off_track"): {"cart_left_track": 1.0},
    ("acrobot", "pump"): {"swung_up": 1.0},
    ("mountaincar", "pump"): {"goal_reached": 1.0, "left_wall_hit": 0.1},
    ("mountaincar_continuous", "pump"): {"goal_reached": 1.0, "left_wall_hit": 0.1},
    ("pendulum", "swing_up"): {"upright": 1.0},
}
# actions under which an episode cannot terminate before the time limit
NEVER_TERMINATES = {
    "cartpole": "where(0.1 * obs[:, 0] + 0.5 * obs[:, 1] + obs[:, 2] + 0.5 * obs[:, 3] > 0, 1, 0)",
    "acrobot": "1",  # no torque: the links only sway around hanging down
    "mountaincar": "1",  # no push: the car cannot climb out of the valley
    "mountaincar_continuous": "0.0",
    "pendulum": "0.0",
}


@pytest.fixture(scope="module")
def drivers() -> Iterator[dict[str, tuple[EnvSpec, Driver, Driver]]]:
    built: dict[str, tuple[EnvSpec, Driver, Driver]] = {}
    yield built
    for _, ref, port in built.values():
        ref.close()
        port.close()


def env(drivers: dict, name: str) -> tuple[EnvSpec, Driver, Driver]:
    if name not in drivers:
        spec = load_spec(REPO / "references" / name)
        port = port_recipe(spec, REPO / spec.port["jax"])
        drivers[name] = (spec, build_driver(reference_recipe(spec)), build_driver(port))
    return drivers[name]


def step(spec: EnvSpec, driver: Driver, state: State, actions: np.ndarray) -> Transition:
    return check_transition(spec, driver.step(state, actions), len(actions), driver.side)


def events(spec: EnvSpec, before: State, tr: Transition, actions: np.ndarray) -> dict:
    inputs = dict(after=tr.state, action=actions, reward=tr.reward, obs=tr.obs)
    inputs.update(terminated=tr.terminated, truncated=tr.truncated, before=before)
    return {
        e.name: np.broadcast_to(spec.expression(e.expr)(**inputs), tr.reward.shape)
        for e in spec.event
    }


@pytest.mark.parametrize("name", ENVS)
def test_spec_loads_with_working_expressions(drivers: dict, name: str) -> None:
    spec, ref, _ = env(drivers, name)
    assert spec.name == name and spec.port["jax"] == f"generated/{name}/jax"
    assert spec.rng.mode == "sync" and spec.compare.mode == "tolerance"
    assert spec.field("time").attr == "@elapsed_steps"
    state = ref.reset(np.arange(8, dtype=np.uint32))
    obs = ref.observe(state)
    for p in spec.policy:
        actions = ScriptedPolicy(spec, p.expr, p.name).act(obs, np.zeros(8))
        assert actions.shape == (8, *spec.action.shape)
        tr = step(spec, ref, state, actions)
        for hit in events(spec, state, tr, actions).values():
            assert hit.dtype == bool


@pytest.mark.parametrize("name", ENVS)
def test_one_step_agrees_from_random_valid_states(drivers: dict, name: str) -> None:
    spec, ref, port = env(drivers, name)
    rng = np.random.default_rng(2026)
    state = sample_states(spec, rng, 3000)
    actions = random_actions(spec, rng, 3000)
    if spec.action.type == "continuous":
        # envs clip out-of-range actions, and MountainCarContinuous charges the unclipped one
        actions[::3] *= 3
    expected, actual = step(spec, ref, state, actions), step(spec, port, state, actions)
    diff = compare_transitions(spec, expected, actual, state, actions)
    i = diff.first()
    assert i is None, (
        f"{name}: {diff.keys_at(i)} differ at {take_state(state, i)} action {actions[i]}"
    )
    if spec.termination is None:
        assert not expected.terminated.any()
    else:
        predicted = spec.expression(spec.termination)(after=expected.state)
        np.testing.assert_array_equal(predicted, expected.terminated)
    atol, _ = spec.tolerance(None)
    np.testing.assert_allclose(port.observe(state), ref.observe(state), rtol=0, atol=atol)


@pytest.mark.parametrize("name", ENVS)
def test_reset_states_lie_in_ranges_and_match_in_distribution(drivers: dict, name: str) -> None:
    spec, ref, port = env(drivers, name)
    seeds = np.arange(500, dtype=np.uint32)
    ref_state, port_state = ref.reset(seeds), port.reset(seeds)
    for f in spec.state:
        for state in (ref_state, port_state):
            assert f.low <= state[f.name].min() and state[f.name].max() <= f.high, f.name
        if np.ptp(ref_state[f.name]) > 0:
            assert stats.ks_2samp(ref_state[f.name], port_state[f.name]).pvalue > 1e-3, f.name


@pytest.mark.parametrize("name", ENVS)
def test_time_limit_truncates_at_episode_cap(drivers: dict, name: str) -> None:
    spec, ref, port = env(drivers, name)
    policy = ScriptedPolicy(spec, NEVER_TERMINATES[name], "never_terminates")
    for driver in (ref, port):
        state = driver.reset(np.arange(4, dtype=np.uint32))
        obs = driver.observe(state)
        for t in range(1, spec.episode_cap + 1):
            tr = step(spec, driver, state, policy.act(obs, np.full(4, t)))
            assert not tr.terminated.any()
            assert tr.truncated.all() == (t == spec.episode_cap), (driver.side, t)
            state, obs = tr.state, tr.obs
        assert (state["time"] == spec.episode_cap).all()


@pytest.mark.parametrize(("name", "policy_name"), sorted(RARE_EVENTS))
def test_scripted_policy_reaches_its_rare_event(drivers: dict, name: str, policy_name: str) -> None:
    spec, ref, _ = env(drivers, name)
    source = next(p.expr for p in spec.policy if p.name == policy_name)
    policy = ScriptedPolicy(spec, source, policy_name)
    n = 8
    state = ref.reset(np.arange(100, 100 + n, dtype=np.uint32))
    obs, active = ref.observe(state), np.arange(n)
    seen = {e: np.zeros(n, dtype=bool) for e in RARE_EVENTS[name, policy_name]}
    for t in range(spec.episode_cap):
        actions = policy.act(obs, np.full(len(active), t))
        tr = step(spec, ref, state, actions)
        for event, hit in events(spec, state, tr, actions).items():
            if event in seen:
                seen[event][active[hit]] = True
        keep = ~(tr.terminated | tr.truncated)
        if not keep.any():
            break
        active, state, obs = active[keep], take_state(tr.state, keep), tr.obs[keep]
    for event, fraction in RARE_EVENTS[name, policy_name].items():
        assert seen[event].mean() >= fraction, (event, seen[event])


def test_reference_driver_is_functional_across_terminal_steps(drivers: dict) -> None:
    spec, ref, _ = env(drivers, "cartpole")
    # pole past the threshold: CartPole pays 0 instead of 1 on a second terminal step unless
    # the driver clears its hidden steps_beyond_terminated between calls
    state = {
        "x": [0.0, 1.0],
        "x_dot": [0.0, 0.5],
        "theta": [0.2094, -0.2],
        "theta_dot": [2.0, -3.0],
    }
    state = {k: np.asarray(v) for k, v in state.items()} | {"time": np.array([3, 499], np.int32)}
    actions = np.array([1, 0], np.int32)
    first, second = step(spec, ref, state, actions), step(spec, ref, state, actions)
    assert first.terminated.all() and (first.reward == 1.0).all()
    assert (second.reward == 1.0).all() and np.array_equal(first.obs, second.obs)
    np.testing.assert_array_equal(first.truncated, [False, True])
    swapped = step(spec, ref, take_state(state, np.array([1, 0])), actions[::-1])
    np.testing.assert_array_equal(swapped.obs, first.obs[::-1])
    assert ref.source_files()[0].name == "cartpole.py"


def test_python_driver_drives_a_class_like_the_gymnasium_driver(tmp_path: Path) -> None:
    source = tmp_path / "cartpole_ref.py"
    source.write_text(
        "from gymnasium.envs.classic_control.cartpole import CartPoleEnv\n\n\n"
        "class CartPole(CartPoleEnv):\n    pass\n"
    )
    spec = load_spec(REPO / "references" / "cartpole")
    with pytest.raises(BadInput, match="elapsed_steps"):
        PythonDriver(spec, f"{source}:CartPole")
    spec = spec.model_copy(update={"state": tuple(f for f in spec.state if f.name != "time")})
    python, gym = PythonDriver(spec, f"{source}:CartPole"), GymnasiumDriver(spec, "CartPole-v1")
    rng = np.random.default_rng(3)
    state, actions = sample_states(spec, rng, 200), random_actions(spec, rng, 200)
    a, b = python.step(state, actions), gym.step(state, actions)
    for k in spec.field_names:
        np.testing.assert_array_equal(a.state[k], b.state[k])
    np.testing.assert_array_equal(a.reward, b.reward)
    np.testing.assert_array_equal(a.terminated, b.terminated)
    assert not a.truncated.any() and python.source_files() == [source.resolve()]
