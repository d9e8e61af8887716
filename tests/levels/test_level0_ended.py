"""L0 against a reference that refuses to step a finished game (rlcard raises there): L0 never
steps an episode after it ended, and a reference that raises on a running episode is a finding
that names the episode's seed, the step and the state it was given."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.spec import load_spec
from envforge.verify.runner import verify

REFERENCE = '''
import numpy as np
from gymnasium import spaces


class Line:
    """A token on a line; the game is over at |pos| >= 3, and stepping an ended game raises."""

    def __init__(self):
        self.observation_space = spaces.Box(-9.0, 9.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.pos = 0

    def _get_obs(self):
        return np.array([self.pos], np.float32)

    def reset(self, seed=None, options=None):
        self.np_random = np.random.default_rng(seed)
        self.pos = int(self.np_random.integers(-1, 2))
        return self._get_obs(), {}

    def step(self, action):
        if abs(self.pos) >= 3:
            raise RuntimeError("the game is over")
        if BUG and self.pos == 2 and action == 1:
            raise KeyError("no square right of 2")
        self.pos += 1 if action == 1 else -1
        return self._get_obs(), 1.0, abs(self.pos) >= 3, False, {}
'''

PORT = """
import jax.numpy as jnp
from typing import NamedTuple


class EnvState(NamedTuple):
    pos: jnp.ndarray


def reset(seed):
    return EnvState(jnp.int32(seed % 3 - 1))


def observe(state):
    return jnp.reshape(state.pos, (1,)).astype(jnp.float32)


def step(state, action):
    pos = state.pos + jnp.where(action == 1, 1, -1).astype(jnp.int32)
    nxt = EnvState(pos)
    return nxt, observe(nxt), jnp.float32(1.0), jnp.abs(pos) >= 3, jnp.bool_(False)


def to_canonical(state):
    return state._asdict()


def from_canonical(fields):
    return EnvState(jnp.asarray(fields["pos"], jnp.int32))
"""

SPEC = """
name = "line"
reference = "line.py:Line"
episode_cap = 100
[observation]
shape = [1]
low = -9.0
high = 9.0
[action]
type = "discrete"
n = 2
[[state]]
name = "pos"
dtype = "int32"
low = -3
high = 3
attr = "pos"
[rng]
mode = "sync"
"""


def setup(tmp_path: Path, bug: bool) -> Path:
    (tmp_path / "line.py").write_text(REFERENCE.replace("BUG", str(bug)))
    (tmp_path / "env.toml").write_text(SPEC)
    port = tmp_path / "port"
    port.mkdir()
    (port / "line.py").write_text(PORT)
    return port


def test_l0_does_not_step_ended_episodes(tmp_path: Path) -> None:
    port = setup(tmp_path, bug=False)
    report = verify(load_spec(tmp_path / "env.toml"), port, [0])
    (level,) = report.levels
    # before: every episode ends within 64 steps and was stepped again, so the reference raised
    # "the game is over" and L0 said "reference error" with no seed, step or state
    assert level.status == "pass", (level.summary, [f.message for f in level.findings])


@pytest.mark.slow
def test_a_reference_raising_in_l0_names_seed_step_and_state(tmp_path: Path) -> None:
    port = setup(tmp_path, bug=True)
    report = verify(load_spec(tmp_path / "env.toml"), port, [0])
    (level,) = report.levels
    assert level.status == "error" and level.reference_failed, level.summary
    (finding,) = level.findings
    assert "KeyError" in finding.message and "seed" in finding.message
    assert finding.seed is not None and finding.step is not None
    assert finding.state_before == {"pos": 2}
    # the actions from the reset reach the failing step, and its last action pushes right
    assert len(finding.actions) == finding.step + 1 and finding.actions[-1] == 1
