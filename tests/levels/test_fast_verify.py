"""The default verify's speed-ups keep what they compare: a run of steps in one driver call equals
the same steps one call each, L2 crosses the driver socket once per action run instead of once
per step (and still finds a divergence deep in a run), and a sandboxed driver call does not ask
the docker engine whether the container lives."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK_SWEEP
from test_isolation import counter_env

from envforge.backends import isolated
from envforge.backends.base import Driver
from envforge.backends.jax import JaxDriver
from envforge.backends.recipe import open_driver, port_recipe, reference_recipe
from envforge.sandbox.docker import DockerServer, docker_available
from envforge.sandbox.driver import open_sandboxed
from envforge.sandbox.select import open_sandbox
from envforge.spec import load_spec, spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

ROOT = Path(__file__).resolve().parents[2]


def _same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for k in x.state:
            np.testing.assert_array_equal(x.state[k], y.state[k], err_msg=k)
        for name in ("obs", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)


def test_step_sequence_equals_steps_one_call_each(tmp_path: Path) -> None:
    """Isolated C reference and the JAX port's scan, against stepping one action at a time; with
    ``until_done`` the sequence ends on the step that ends the episode (x reaches 10)."""
    toml, port = counter_env(tmp_path)
    spec = load_spec(toml)
    actions = np.ones((30, 1), dtype=np.int32)
    actions[::4] = 0
    ref = open_driver(reference_recipe(spec, None), True, 60.0)
    jax_port = JaxDriver(spec, port)
    try:
        for driver in (ref, jax_port):
            state = driver.reset(np.array([1], dtype=np.uint32))
            one_by_one = Driver.step_sequence(driver, state, actions)  # the base loop
            _same(driver.step_sequence(state, actions), one_by_one)
            until = driver.step_sequence(state, actions, until_done=True)
            ends = [bool(tr.terminated[0]) for tr in one_by_one].index(True)
            _same(until, one_by_one[: ends + 1])
    finally:
        ref.close()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter:
    seen: Counter = Counter()
    call_raw = isolated.IsolatedDriver._call_raw

    def counted(self: isolated.IsolatedDriver, method: str, *args: object) -> object:
        seen[self.side, method] += 1
        return call_raw(self, method, *args)

    monkeypatch.setattr(isolated.IsolatedDriver, "_call_raw", counted)
    return seen


def test_l2_steps_action_runs_in_one_call_and_finds_a_late_divergence(
    tmp_path: Path, calls: Counter
) -> None:
    """A port wrong only once x passes 6 (several steps into an episode) fails L2 with the
    divergence's step, while the drivers were called far fewer times than steps were compared."""
    toml, port = counter_env(tmp_path)
    spec = load_spec(toml)
    report = verify(spec, port, [2], VerifyOptions(seed_sweep=QUICK_SWEEP))
    steps = report.levels[0].stats["steps"]
    port_calls = sum(n for (side, m), n in calls.items() if side == "port" and "step" in m)
    assert report.passed and calls["port", "step_sequence"] > 0
    assert port_calls * 3 < steps, (calls, steps)

    bug = "    action = jnp.where(state.x >= 6, action * 2, action)"
    (tmp_path / "broken").mkdir()
    _, broken = counter_env(tmp_path / "broken", port_bug=bug)
    level = verify(spec, broken, [2], VerifyOptions(seed_sweep=QUICK_SWEEP)).levels[0]
    assert level.status == "fail", level.summary
    finding = level.findings[0]
    assert finding.check == "sequence.mismatch" and "x" in finding.fields
    assert finding.expected["x"] == finding.actual["x"] - 1  # one step past x = 6, not later


@pytest.mark.skipif(not docker_available(), reason="no docker engine")
def test_sandboxed_calls_do_not_ask_the_docker_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking the engine for the container's state before every call was most of a docker
    driver call's time; the socket reports a dead server instead."""
    asked = Counter()
    state = DockerServer._state

    def counted(self: DockerServer) -> dict:
        asked["state"] += 1
        return state(self)

    monkeypatch.setattr(DockerServer, "_state", counted)
    spec = spec_for_name("pong")
    sandbox = open_sandbox("docker")
    driver = open_sandboxed(
        port_recipe(spec, ROOT / "generated/pong/jax", None), sandbox, True, 60.0
    )
    try:
        before = asked["state"]
        state0 = driver.reset(np.arange(4, dtype=np.uint32))
        for _ in range(20):
            state0 = driver.step(state0, np.zeros(4, dtype=spec.action.dtype)).state
        assert asked["state"] == before
    finally:
        driver.close()
