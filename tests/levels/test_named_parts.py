"""Nested observations as named parts: a gymnasium Dict observation (a uint8 grid, a Discrete
heading, a MultiDiscrete position and a Text note) drafted by init as parts with bounds from the
space, a JAX port returning a pytree of the same keys, and findings that name the part and the
element that differs (``obs.grid[1,2]``), or the part a port's pytree lacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envforge.errors import SpecError
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

REFERENCE = '''
import numpy as np
from gymnasium import spaces


class Walker:
    """A walker on a 3x4 grid; it sees the grid (its cell marked by its heading) and its cell."""

    def __init__(self):
        self.observation_space = spaces.Dict(
            {
                "grid": spaces.Box(0, 5, (3, 4), np.uint8),
                "heading": spaces.Discrete(4),
                "pos": spaces.MultiDiscrete([3, 4]),
                "note": spaces.Text(20),
            }
        )
        self.action_space = spaces.Discrete(3)
        self.row, self.col, self.heading = 0, 0, 0

    def _get_obs(self):
        grid = np.zeros((3, 4), np.uint8)
        grid[self.row, self.col] = 1 + self.heading
        return {
            "grid": grid,
            "heading": self.heading,
            "pos": np.array([self.row, self.col], np.int64),
            "note": "walk to the corner",
        }

    def reset(self, seed=None, options=None):
        self.np_random = np.random.default_rng(seed)
        self.row = int(self.np_random.integers(0, 3))
        self.col = int(self.np_random.integers(0, 4))
        self.heading = int(self.np_random.integers(0, 4))
        return self._get_obs(), {}

    def step(self, action):
        if action == 0:
            self.heading = (self.heading + 1) % 4
        elif action == 1:
            self.heading = (self.heading + 3) % 4
        else:
            dr, dc = [(0, 1), (1, 0), (0, -1), (-1, 0)][self.heading]
            self.row = min(max(self.row + dr, 0), 2)
            self.col = min(max(self.col + dc, 0), 3)
        done = self.row == 2 and self.col == 3
        return self._get_obs(), float(done), done, False, {}
'''

PORT = """
import jax.numpy as jnp
from typing import NamedTuple


class EnvState(NamedTuple):
    row: jnp.ndarray
    col: jnp.ndarray
    heading: jnp.ndarray


def reset(seed):
    return EnvState(jnp.int32(seed % 3), jnp.int32(seed % 4), jnp.int32(seed % 4))


def observe(state):
    mark = (1 + state.heading).astype(jnp.uint8)
    grid = jnp.zeros((3, 4), jnp.uint8).at[state.row, state.col].set(mark)
    GRID_BUG
    return {"grid": grid, "heading": state.heading, "pos": jnp.stack([state.row, state.col])}


def step(state, action):
    heading = jnp.where(action == 0, (state.heading + 1) % 4, state.heading)
    heading = jnp.where(action == 1, (state.heading + 3) % 4, heading)
    dr = jnp.array([0, 1, 0, -1], jnp.int32)[state.heading]
    dc = jnp.array([1, 0, -1, 0], jnp.int32)[state.heading]
    move = action == 2
    row = jnp.where(move, jnp.clip(state.row + dr, 0, 2), state.row)
    col = jnp.where(move, jnp.clip(state.col + dc, 0, 3), state.col)
    nxt = EnvState(row.astype(jnp.int32), col.astype(jnp.int32), heading.astype(jnp.int32))
    done = (row == 2) & (col == 3)
    return nxt, observe(nxt), done.astype(jnp.float32), done, jnp.bool_(False)


def to_canonical(state):
    return state._asdict()


def from_canonical(fields):
    return EnvState(*(jnp.asarray(fields[k], jnp.int32) for k in EnvState._fields))
"""

SPEC = """
name = "walker"
reference = "walker.py:Walker"
episode_cap = 50
[observation.parts.grid]
shape = [3, 4]
dtype = "uint8"
low = 0
high = 5
[observation.parts.heading]
dtype = "int64"
low = 0
high = 3
[observation.parts.pos]
shape = [2]
dtype = "int64"
low = 0
high = [2, 3]
[action]
type = "discrete"
n = 3
[[state]]
name = "row"
dtype = "int32"
low = 0
high = 2
attr = "row"
[[state]]
name = "col"
dtype = "int32"
low = 0
high = 3
attr = "col"
[[state]]
name = "heading"
dtype = "int32"
low = 0
high = 3
attr = "heading"
[rng]
mode = "sync"
[compare]
mode = "exact"
"""

# a wrong mark in one cell only: the walker's heading 2 at the grid's row 1, column 2
WRONG_CELL = "grid = jnp.where((state.row == 1) & (state.col == 2) & (state.heading == 2), grid.at[1, 2].set(1), grid)"


def setup(tmp_path: Path, bug: str = "") -> Path:
    (tmp_path / "walker.py").write_text(REFERENCE)
    (tmp_path / "env.toml").write_text(SPEC)
    port = tmp_path / "port"
    port.mkdir(exist_ok=True)
    (port / "walker.py").write_text(PORT.replace("GRID_BUG", bug or "pass"))
    return port


def test_parts_are_one_flat_row_with_named_elements(tmp_path: Path) -> None:
    setup(tmp_path)
    obs = load_spec(tmp_path / "env.toml").observation
    assert obs.shape == (15,) and obs.dtype == "float64"
    low, high = obs.bounds()
    assert high[:12].tolist() == [5.0] * 12 and high[13:].tolist() == [2.0, 3.0]
    assert obs.element_name(6) == "obs.grid[1,2]"
    assert obs.element_name(12) == "obs.heading"
    assert obs.element_name(14) == "obs.pos[1]"


def test_a_part_bound_of_the_wrong_length_is_one_line(tmp_path: Path) -> None:
    setup(tmp_path)
    (tmp_path / "env.toml").write_text(SPEC.replace("high = [2, 3]", "high = [2, 3, 4]"))
    with pytest.raises(SpecError) as e:
        load_spec(tmp_path / "env.toml")
    assert "one value per element (2 for shape [2])" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_port_returning_the_pytree_verifies(tmp_path: Path) -> None:
    port = setup(tmp_path)
    report = verify(load_spec(tmp_path / "env.toml"), port, [0, 1, 2, 3], VerifyOptions(scale=0.2))
    assert report.passed, [(lv.level, lv.summary) for lv in report.levels]


@pytest.mark.slow
def test_a_wrong_cell_is_named_by_part_and_index(tmp_path: Path) -> None:
    port = setup(tmp_path, WRONG_CELL)
    report = verify(load_spec(tmp_path / "env.toml"), port, [1], VerifyOptions(scale=0.2))
    (level,) = report.levels
    assert level.status == "fail"
    assert "obs.grid[1,2]" in level.findings[0].message, level.findings[0].message


def test_a_missing_part_is_a_contract_finding_naming_it(tmp_path: Path) -> None:
    port = setup(tmp_path)
    text = (port / "walker.py").read_text()
    (port / "walker.py").write_text(text.replace('"heading": state.heading, ', ""))
    report = verify(load_spec(tmp_path / "env.toml"), port, [0], VerifyOptions(scale=0.2))
    (level,) = report.levels
    assert level.status in ("fail", "error")
    assert any("obs.heading" in f.message for f in level.findings), [
        f.message for f in level.findings
    ]


def test_init_drafts_the_dict_as_parts_with_bounds_from_the_space(tmp_path: Path) -> None:
    from envforge.commands.init import run_init

    setup(tmp_path)
    out = tmp_path / "drafted"
    outcome = run_init(str(tmp_path / "walker.py") + ":Walker", out=out, episodes=2)
    assert outcome.written and outcome.draft.check is not None
    assert outcome.draft.check.passed, outcome.draft.check.summary()
    text = (out / "env.toml").read_text()
    assert "[observation.parts.grid]" in text and 'dtype = "uint8"' in text
    assert "high = 5.0" in text  # one bound for every cell, not twelve
    assert "[observation.parts.pos]" in text and "high = [2.0, 3.0]" in text
    assert "obs.note: a Text space (a string)" in text  # left out, with the reason
    drafted = load_spec(out / "env.toml").observation
    assert drafted.layout is not None and drafted.layout.names == ("grid", "heading", "pos")
    np.testing.assert_array_equal(drafted.bounds()[1], load_spec(tmp_path).observation.bounds()[1])


@pytest.mark.slow
def test_bench_takes_a_spec_and_a_port_with_no_references_folder(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    port = setup(tmp_path)
    # before: bench took only an env name found under references/ ("unknown env")
    args = ["--batch", "4", "--repeats", "1", "--min-run", "0.05", "--policy", "random"]
    done = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "bench", "--spec", str(tmp_path / "env.toml")]
        + ["--port", str(port), "--resets", "fresh", "--json", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows, rows


def test_a_command_without_env_ref_or_spec_says_all_three() -> None:
    from envforge.errors import BadInput
    from envforge.resolve import resolve_spec

    with pytest.raises(BadInput, match=r"or pass --ref or --spec"):
        resolve_spec(None, command="bench")
