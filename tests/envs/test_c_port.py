"""The C target (envforge/targets/c.py, backends/c_port.py): CartPole's hand-written C port
verified against gymnasium through the sandbox's door, and the same header behind
envforge.make."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import envforge
from envforge.backends.c_port import CPortDriver, port_settings
from envforge.errors import BadInput
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

ROOT = Path(__file__).resolve().parents[2]
PORT = ROOT / "generated" / "cartpole" / "c"


def test_the_port_names_its_struct_and_prefix_and_a_header_without_reset_is_refused(
    tmp_path: Path,
) -> None:
    settings = port_settings(PORT / "cartpole.h")
    assert (settings.struct, settings.prefix) == ("CartPole", "cartpole")
    bad = tmp_path / "cartpole.h"
    bad.write_text(
        "typedef struct { double x; } CartPole;\n/* void cartpole_reset(CartPole* e); */\n"
    )
    with pytest.raises(BadInput, match="no `void <prefix>_reset"):
        CPortDriver(spec_for_name("cartpole"), tmp_path)


def test_the_drivers_step_is_gymnasiums_step_from_the_same_state() -> None:
    spec = spec_for_name("cartpole")
    driver = CPortDriver(spec, PORT)
    state = driver.reset(np.arange(8, dtype=np.uint32))
    assert np.all(np.abs(state["x"]) <= 0.05) and np.all(state["time"] == 0)
    actions = np.array([0, 1] * 4, dtype=np.int32)
    out = driver.step(state, actions)
    env = gym.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    for i in range(8):
        env.state = np.array([state[k][i] for k in ("x", "x_dot", "theta", "theta_dot")])
        obs, reward, terminated, _, _ = env.step(int(actions[i]))
        np.testing.assert_allclose(out.obs[i], obs, rtol=0, atol=1e-7)
        assert out.reward[i] == reward and out.terminated[i] == terminated


def test_cartpole_c_port_verifies_at_levels_0_and_1_in_the_process_sandbox() -> None:
    # the one fast demonstration: the same door as every port (a sandboxed driver server)
    report = verify(
        spec_for_name("cartpole"), PORT, [0, 1], VerifyOptions(sandbox="process", scale=0.1)
    )
    assert report.passed, report.to_dict()
    assert [lv.status for lv in report.levels] == ["pass", "pass"]


@pytest.mark.slow  # L2 and L3 at full scale: about a minute on a quiet 2-core machine
def test_cartpole_c_port_is_equivalent_at_levels_0_to_3() -> None:
    report = verify(spec_for_name("cartpole"), PORT, [0, 1, 2, 3], VerifyOptions(sandbox="process"))
    assert report.passed, report.to_dict()


def test_make_builds_a_vector_env_from_the_c_port() -> None:
    env = envforge.make("cartpole", target="c", num_envs=16)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (16, 4) and obs.dtype == np.float32
    ended, restarted = 0, 0
    for _ in range(60):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        # 1 per step; 0 on the step that auto-resets an ended env (gymnasium's NEXT_STEP)
        assert set(np.unique(reward)) <= {0.0, 1.0}
        ended += int(terminated.sum())
        restarted += int((reward == 0).sum())
    assert ended > 0 and restarted > 0  # random pushes topple poles within 60 steps
    single = envforge.make("cartpole", target="c")
    assert isinstance(single, gym.Env) and single.reset(seed=0)[0].shape == (4,)


def test_a_finding_in_an_included_header_names_that_headers_line(tmp_path: Path) -> None:
    """The port's constants moved into a header it includes by a quoted name, one of them
    wrong there: the finding follows the assigning line in cartpole.h to the constant's line
    in the included header."""
    text = (PORT / "cartpole.h").read_text()
    start, end = text.index("#define CARTPOLE_GRAVITY"), text.index("/* the canonical state")
    constants = text[start:end].replace("FORCE_MAG 10.0", "FORCE_MAG 11.0")
    (tmp_path / "cartpole_constants.h").write_text(constants)
    (tmp_path / "cartpole.h").write_text(
        text[:start] + '#include "cartpole_constants.h"\n\n' + text[end:]
    )
    options = VerifyOptions(sandbox="process", scale=0.1, fail_fast=True)
    report = verify(spec_for_name("cartpole"), tmp_path, [1], options)
    finding = report.first_finding()
    assert finding is not None and "x_dot" in finding.fields, report.to_dict()
    line = 1 + constants[: constants.index("FORCE_MAG 11.0")].count("\n")
    named = [(Path(loc.file).name, loc.line) for loc in finding.port_lines]
    assert ("cartpole_constants.h", line) in named, named
