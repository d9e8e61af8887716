"""init reads the episode end an env enforces itself: an env without a TimeLimit that
truncates at its own ``max_steps`` (as MiniGrid's do) gets that cap, named, instead of a
guessed 1000."""

from __future__ import annotations

from pathlib import Path

from envforge.init.draft import episode_cap
from envforge.init.probe import env_factory, probe

WANDER = '''
import numpy as np
from gymnasium import spaces


class Wander:
    """A random walk that never ends by itself; the env cuts it at max_steps."""

    def __init__(self, max_steps=12):
        self.max_steps = max_steps
        self.observation_space = spaces.Box(-99, 99, (1,), np.int64)
        self.action_space = spaces.Discrete(2)
        self.pos, self.step_count = 0, 0

    def reset(self, seed=None, options=None):
        self.pos, self.step_count = 0, 0
        return np.array([self.pos]), {}

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        self.step_count += 1
        return np.array([self.pos]), 0.0, False, self.step_count >= self.max_steps, {}
'''


def _cap(tmp_path: Path, options: dict[str, int]) -> tuple[int, str]:
    (tmp_path / "wander.py").write_text(WANDER)
    ref = f"{tmp_path / 'wander.py'}:Wander"
    return episode_cap(probe(ref, env_factory(ref, tmp_path, options), episodes=4))


def test_the_cap_the_env_enforces_is_drafted_and_named(tmp_path: Path) -> None:
    # before: episode_cap = 1000 "GUESS: no TimeLimit" while the probe saw it truncate at 12
    cap, note = _cap(tmp_path, {})
    assert cap == 12, note
    assert "its max_steps" in note and "GUESS" not in note


def test_the_cap_follows_the_constructor_options(tmp_path: Path) -> None:
    cap, note = _cap(tmp_path, {"max_steps": 7})
    assert cap == 7 and "its max_steps" in note


HOLDER = '''
import numpy as np
from gymnasium import spaces


class Key:
    def __init__(self, pos):
        self.color = "yellow"
        self.cur_pos = np.array(pos)


class Holder:
    """Picks a key up at cell 3: ``carrying`` is None after reset, a Key object later."""

    def __init__(self):
        self.observation_space = spaces.Box(0, 9, (1,), np.int64)
        self.action_space = spaces.Discrete(2)
        self.pos, self.carrying = 0, None

    def reset(self, seed=None, options=None):
        self.pos, self.carrying = 0, None
        return np.array([self.pos]), {}

    def step(self, action):
        self.pos = min(max(self.pos + (1 if action == 1 else -1), 0), 9)
        if self.pos == 3 and self.carrying is None:
            self.carrying = Key([self.pos, 0])
        return np.array([self.pos]), 0.0, self.pos == 9, False, {}
'''


def test_an_attribute_none_then_an_object_is_named_not_drafted(tmp_path: Path) -> None:
    from envforge.init.probe import state_attributes

    (tmp_path / "holder.py").write_text(HOLDER)
    ref = f"{tmp_path / 'holder.py'}:Holder"
    seen = probe(ref, env_factory(ref, tmp_path), episodes=6)
    candidates, left_out = state_attributes(seen)
    # before: carrying.cur_pos was drafted as a field, and reading it after a reset (carrying
    # None) was an AttributeError traceback
    assert [c.name for c in candidates] == ["pos"]
    (why,) = [why for name, why in left_out if name == "carrying"]
    assert why.startswith("None at times, an object at others")
    assert not any(name.startswith("carrying.") for name, _ in left_out)
