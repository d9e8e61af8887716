"""References by the names users have: a gymnasium id of an installed package registering
through the ``gymnasium.envs`` entry points, ``gymnasium:<module>:<id>`` for a package that
registers on import (and the one line that says so when the bare id is unknown), and a class
of an installed module, ``pkg.module:Class``, made with the spec's ``[options]``.

The packages are real installed distributions (a folder with ``.dist-info`` metadata on
``PYTHONPATH``), made for the test: one registers its ids on import and ships no entry point
(as minigrid does), the other registers through an entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

LINE_ENV = '''
import gymnasium
import numpy as np
from gymnasium import spaces


class Line(gymnasium.Env):
    """A token on a line of ``length`` cells; it ends at either end."""

    def __init__(self, length=5):
        self.length = length
        self.observation_space = spaces.Box(0, length - 1, (1,), np.int64)
        self.action_space = spaces.Discrete(2)
        self.pos = 0

    def _get_obs(self):
        return np.array([self.pos], np.int64)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = int(self.np_random.integers(1, self.length - 1))
        return self._get_obs(), {}

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        done = self.pos in (0, self.length - 1)
        return self._get_obs(), float(self.pos == self.length - 1), done, False, {}
'''


def _dist(site: Path, name: str, entry_points: str = "") -> None:
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "top_level.txt").write_text(f"{name}\n")
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    # registers on import, no entry point (minigrid's way)
    (site / "walkworld").mkdir()
    (site / "walkworld" / "line.py").write_text(LINE_ENV)
    (site / "walkworld" / "__init__.py").write_text(
        "import gymnasium\n"
        'gymnasium.register("WalkWorld-Line-v0", entry_point="walkworld.line:Line", '
        "max_episode_steps=40)\n"
    )
    _dist(site, "walkworld")
    # registers through the gymnasium.envs entry point group
    (site / "pointplug").mkdir()
    (site / "pointplug" / "__init__.py").write_text(
        "import gymnasium\n\n\ndef register_envs():\n"
        '    gymnasium.register("PointPlug-Line-v0", entry_point="walkworld.line:Line")\n'
    )
    _dist(site, "pointplug", "[gymnasium.envs]\n__root__ = pointplug:register_envs\n")
    return site


def _run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300
    )


CHECK = "from envforge.backends.gym_ids import check_id; check_id({!r}); print('found')"


def test_an_id_registered_on_import_says_which_form_to_try(site: Path) -> None:
    done = _run(site, "-c", CHECK.format("WalkWorld-Line-v0"))
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert "try gymnasium:walkworld:WalkWorld-Line-v0" in line, line


def test_the_module_form_imports_the_package_first(site: Path) -> None:
    done = _run(site, "-c", CHECK.format("walkworld:WalkWorld-Line-v0"))
    assert done.stdout.strip() == "found", done.stderr


def test_an_entry_point_registers_its_ids(site: Path) -> None:
    # before: gymnasium 1.x loads no entry points, so the id was unknown
    done = _run(site, "-c", CHECK.format("PointPlug-Line-v0"))
    assert done.stdout.strip() == "found", done.stderr


def test_an_unknown_id_without_a_matching_package_names_the_module_form() -> None:
    from envforge.backends.gym_ids import unknown_id_line

    line = unknown_id_line("Zqxv-Nothing-v0")
    assert "gymnasium:<module>:Zqxv-Nothing-v0" in line and "\n" not in line


@pytest.mark.slow
def test_verify_refuses_an_unknown_id_in_one_line(site: Path, tmp_path: Path) -> None:
    spec = tmp_path / "env.toml"
    spec.write_text(SPEC.format(reference="gymnasium:WalkWorld-Line-v0"))
    done = _run(site, "-m", "envforge.cli", "verify", "--spec", str(spec), "--levels", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("envforge: error: ") and len(done.stderr.splitlines()) == 1
    assert "gymnasium:walkworld:WalkWorld-Line-v0" in done.stderr


SPEC = """
name = "line"
reference = "{reference}"
episode_cap = 40
[options]
length = 7
[observation]
shape = [1]
dtype = "int64"
low = 0
high = 6
[action]
type = "discrete"
n = 2
[[state]]
name = "pos"
dtype = "int32"
low = 0
high = 6
attr = "pos"
[rng]
mode = "sync"
"""


def test_a_class_of_an_installed_module_is_a_reference(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envforge.backends.recipe import build_driver, reference_recipe
    from envforge.spec import load_spec

    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "env.toml").write_text(SPEC.format(reference="walkworld.line:Line"))
    spec = load_spec(tmp_path / "env.toml")
    assert spec.reference_kind == "python" and spec.reference_module == "walkworld.line"
    assert spec.reference_path() is None
    driver = build_driver(reference_recipe(spec))
    try:
        state = {"pos": np.array([5, 1], np.int32)}
        tr = driver.step(state, np.array([1, 0], np.int32))
        # the spec's [options] made a line of 7: 6 is its right end
        assert tr.state["pos"].tolist() == [6, 0] and tr.terminated.tolist() == [True, True]
        assert tr.reward.tolist() == [1.0, 0.0]
        assert driver.source_files()[0].name == "line.py"
    finally:
        driver.close()


def test_a_missing_installed_module_is_one_line(tmp_path: Path) -> None:
    from envforge.backends.reference_check import check_reference
    from envforge.errors import BrokenReference
    from envforge.spec import load_spec

    (tmp_path / "env.toml").write_text(SPEC.format(reference="nosuchpkg_zz.envs:Line"))
    with pytest.raises(BrokenReference, match="nosuchpkg_zz.envs: no such module is installed"):
        check_reference(load_spec(tmp_path / "env.toml"))


@pytest.mark.slow
def test_init_drafts_a_module_id_and_a_module_class(site: Path, tmp_path: Path) -> None:
    for ref, out in (
        ("gymnasium:walkworld:WalkWorld-Line-v0", "by_id"),
        ("walkworld.line:Line", "by_class"),
    ):
        done = _run(site, "-m", "envforge.cli", "init", "--ref", ref, "--out", str(tmp_path / out))
        assert done.returncode == 0, done.stderr
        text = (tmp_path / out / "env.toml").read_text()
        assert f'reference = "{ref}"' in text
        assert 'dtype = "int64"' in text  # the observation's own dtype
