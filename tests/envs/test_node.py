"""JavaScript references on node: the batched protocol, the declared path mapping, and hostile
references (a thrown error, an endless loop, node exiting or aborting) becoming findings while
the verifier survives. A tiny counter env (JS reference + JAX port in tmp_path) keeps it fast."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK_SWEEP, ROOT

from envforge.backends.node import NodeDriver
from envforge.errors import DriverCrashed, DriverRaised, DriverTimeout
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

pytestmark = pytest.mark.skipif(
    subprocess.run(["which", "node"], capture_output=True).returncode != 0, reason="no node"
)

COUNTER_JS = """\
"use strict";
function reset(seed) {
  return { pos: { x: seed % 3 }, t: 0, trail: [0, 0] };
}
function step(env, action) {
  if (env.t >= HOSTILE_AT) {
    HOSTILE;
  }
  env.pos.x += action;
  env.trail[env.t % 2] = env.pos.x;
  env.t += 1;
  const terminated = env.pos.x >= 10;
  return { reward: action, terminated, truncated: !terminated && env.t >= 50 };
}
function observe(env, out) {
  out[0] = env.pos.x;
}
module.exports = { reset, step, observe };
"""

COUNTER_TOML = """\
name = "counter"
reference = "node:counter.js"
episode_cap = 50
termination = "after.x >= 10"

[observation]
shape = [1]
low = 0.0
high = 20.0

[action]
type = "discrete"
n = 2

[rng]
mode = "replicate"

[[state]]
name = "x"
dtype = "int32"
low = 0
high = 9
attr = "pos.x"

[[state]]
name = "t"
dtype = "int32"
low = 0
high = 49
attr = "t"

[[state]]
name = "trail"
dtype = "int32"
shape = [2]
low = 0
high = 9
attr = "trail[*]"

[verify]
l1_examples = 20
l1_sweep = 256
reset_samples = 200
l2_examples = 5
l3_episodes = 10
"""

COUNTER_PORT = """\
from typing import NamedTuple

import jax
import jax.numpy as jnp


class EnvState(NamedTuple):
    x: jax.Array
    t: jax.Array
    trail: jax.Array


def reset(seed):
    return EnvState(x=(seed % 3).astype(jnp.int32), t=jnp.int32(0), trail=jnp.zeros(2, jnp.int32))


def step(state, action):
    x = state.x + action.astype(jnp.int32)
    s = EnvState(x=x, t=state.t + 1, trail=state.trail.at[state.t % 2].set(x))
    terminated = s.x >= 10
    truncated = ~terminated & (s.t >= 50)
    return s, observe(s), action.astype(jnp.float32), terminated, truncated


def observe(state):
    return state.x.astype(jnp.float32)[None]


def to_canonical(state):
    return state._asdict()


def from_canonical(fields):
    return EnvState(**fields)
"""


def counter_env(tmp_path: Path, hostile: str = "", at: int = 1000) -> tuple[Path, Path]:
    js = COUNTER_JS.replace("HOSTILE_AT", str(at)).replace("HOSTILE", hostile or "void 0")
    (tmp_path / "counter.js").write_text(js)
    toml = tmp_path / "env.toml"
    toml.write_text(COUNTER_TOML)
    port = tmp_path / "port" / "counter.py"
    port.parent.mkdir()
    port.write_text(COUNTER_PORT)
    return toml, port


def test_driver_round_trips_nested_paths(tmp_path: Path) -> None:
    toml, _ = counter_env(tmp_path)
    spec = load_spec(toml)
    driver = NodeDriver(spec, tmp_path / "counter.js")
    try:
        state = driver.reset(np.arange(5, dtype=np.uint32))
        assert state["x"].tolist() == [0, 1, 2, 0, 1]
        state["x"][:] = [3, 4, 5, 6, 7]
        state["trail"][:] = 0
        tr = driver.step(state, np.array([1, 0, 1, 0, 1], np.int32))
        assert tr.state["x"].tolist() == [4, 4, 6, 6, 8]  # the injected state was stepped
        assert tr.state["trail"][:, 0].tolist() == [4, 4, 6, 6, 8]
        assert tr.obs[:, 0].tolist() == [4.0, 4.0, 6.0, 6.0, 8.0]
        assert tr.reward.tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
        assert driver.observe(state)[:, 0].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    finally:
        driver.close()


def test_counter_env_passes(tmp_path: Path) -> None:
    """The harness is sound: without a hostile line the JS counter verifies against its port."""
    toml, port = counter_env(tmp_path)
    report = verify(load_spec(toml), port, [0, 1, 2, 3], VerifyOptions(seed_sweep=QUICK_SWEEP))
    assert [lv.status for lv in report.levels] == ["pass"] * 4, report.to_dict()


def test_a_thrown_error_is_an_exception_finding_at_the_js_line(tmp_path: Path) -> None:
    toml, port = counter_env(tmp_path, 'throw new RangeError("t is too big")', at=2)
    report = verify(load_spec(toml), port, [0], VerifyOptions())
    [result] = report.levels
    [finding] = result.findings
    assert finding.check == "exception"
    assert finding.extra == {"side": "reference", "call": "step", "handler": "step"}
    assert "RangeError: t is too big" in finding.message and "env " in finding.message
    assert "(at counter.js:7, in step)" in finding.message
    [thrown, *_] = finding.reference_lines
    assert thrown.file.endswith("counter.js") and thrown.line == 7
    assert thrown.text.startswith("throw new RangeError")
    assert report.verdict == "reference error" and report.exit_code == 2


@pytest.mark.parametrize(
    ("hostile", "needle"),
    [("process.exit(3)", "exit code 3"), ("process.abort()", "SIGABRT")],
)
def test_node_dying_is_a_crash_finding(tmp_path: Path, hostile: str, needle: str) -> None:
    toml, _ = counter_env(tmp_path, hostile, at=2)
    driver = NodeDriver(load_spec(toml), tmp_path / "counter.js")
    state = driver.reset(np.zeros(4, np.uint32))
    state["t"][:] = 2
    with pytest.raises(DriverCrashed) as info:
        driver.step(state, np.zeros(4, np.int32))
    assert needle in info.value.message
    driver.close()


def test_an_endless_loop_times_out_and_the_verifier_goes_on(tmp_path: Path) -> None:
    toml, port = counter_env(tmp_path, "for (;;) {}", at=2)
    start = time.monotonic()
    report = verify(load_spec(toml), port, [0, 1], VerifyOptions(timeout_s=3.0, all_levels=True))
    assert time.monotonic() - start < 90
    assert [lv.level for lv in report.levels] == [0, 1]  # L1 ran on a fresh node after L0's kill
    for result in report.levels:
        [finding] = result.findings
        assert finding.check == "timeout" and finding.extra["side"] == "reference"
    assert report.exit_code == 2


def test_driver_timeout_without_isolation(tmp_path: Path) -> None:
    toml, _ = counter_env(tmp_path, "for (;;) {}", at=0)
    driver = NodeDriver(load_spec(toml), tmp_path / "counter.js")
    state = driver.reset(np.zeros(2, np.uint32))
    driver.timeout_s = 1.0  # only for the step: starting node on a busy machine can take longer
    with pytest.raises(DriverTimeout, match="node killed"):
        driver.step(state, np.zeros(2, np.int32))
    driver.close()


def test_a_path_that_is_not_on_the_object_is_named(tmp_path: Path) -> None:
    toml, _ = counter_env(tmp_path)
    toml.write_text(COUNTER_TOML.replace('attr = "pos.x"', 'attr = "pos.y"'))
    with pytest.raises(DriverRaised, match=r"field x \(pos\.y\) is not a number"):
        NodeDriver(load_spec(toml), tmp_path / "counter.js")


@pytest.mark.parametrize(
    ("old", "new", "ref", "needle"),
    [
        ('attr = "trail[*]"', 'attr = "trail"', "counter.js", "has 0 [*]"),
        ('attr = "pos.x"', 'attr = "pos x"', "counter.js", "needs attr = a path"),
        ("", "", "missing.js", "not found"),
    ],
)
def test_bad_mapping_or_file_is_one_line_exit_2(
    tmp_path: Path, old: str, new: str, ref: str, needle: str
) -> None:
    toml, port = counter_env(tmp_path)
    toml.write_text(COUNTER_TOML.replace(old, new) if old else COUNTER_TOML)
    result = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "verify", "--ref", str(tmp_path / ref)]
        + ["--port", str(port), "--sandbox", "none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("envforge: error: ") and needle in line, line
