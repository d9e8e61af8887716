"""Probe a gymnasium/Python reference: which attributes hold state, with what dtypes and ranges.

Random rollouts over several seeds; after every reset and every step the object's full
attribute state is snapshotted (``snapshot.py``) and compared with the one before. What changes
on steps or resets is a candidate for the canonical state; what never changes is configuration.
Numeric attributes are tracked elementwise (dtype, shape, observed minimum and maximum), and
the numpy ``Generator`` is watched for draws inside ``step``.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.attrs import ELAPSED_STEPS
from envforge.backends.gymnasium import core, find_time_limit
from envforge.errors import BadInput
from envforge.init.snapshot import LIST, NONE, NUMERIC, OTHER, RNG, Value, snapshot
from envforge.rng.recorder import RowLog, recording


@dataclass
class AttrStats:
    """What the rollouts saw of one attribute."""

    name: str
    kinds: set[str] = field(default_factory=set)
    shapes: set[tuple[int, ...]] = field(default_factory=set)
    dtypes_after_step: Counter[str] = field(default_factory=Counter)
    dtypes_after_reset: Counter[str] = field(default_factory=Counter)
    type_name: str = ""
    changed_on_step: bool = False
    changed_on_reset: bool = False
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    longest: int = 0
    """Most elements seen (lists)."""
    equals_obs: bool = True
    """Its value was the observation after every reset and step (a tabular env's state index)."""
    integral: np.ndarray | None = None
    """Per element: every value seen was a whole number (a 0/1 map kept as floats)."""

    def see(self, value: Value, after_step: bool, obs: np.ndarray) -> None:
        self.kinds.add(value.kind)
        if value.kind == "other":
            self.type_name = value.payload[0]
        if value.kind not in (NUMERIC, LIST):
            self.equals_obs = False
            return
        a = value.payload
        self.shapes.add(a.shape)
        self.longest = max(self.longest, a.size)
        if a.size:
            (self.dtypes_after_step if after_step else self.dtypes_after_reset)[a.dtype.name] += 1
        if value.kind == LIST:  # elementwise ranges make no sense for a list: one range
            self.equals_obs = False
            if a.size:
                whole = np.asarray(_whole(a).all())
                self.integral = whole if self.integral is None else self.integral & whole
                lo, hi = np.asarray(a.min(), np.float64), np.asarray(a.max(), np.float64)
                self.low = lo if self.low is None else np.minimum(self.low, lo)
                self.high = hi if self.high is None else np.maximum(self.high, hi)
            return
        if self.low is None or self.high is None or self.low.shape != a.shape:
            self.low, self.high = a.astype(np.float64), a.astype(np.float64)
            self.integral = _whole(a)
        else:
            self.low = np.minimum(self.low, a)
            self.high = np.maximum(self.high, a)
            self.integral = _whole(a) & (True if self.integral is None else self.integral)
        if a.shape != np.shape(obs) or not np.array_equal(a, obs):
            self.equals_obs = False

    @property
    def variable_list(self) -> bool:
        """A list of numbers (its length may change): a padded field (``pad``)."""
        return self.kinds == {LIST} and all(len(s) == 1 for s in self.shapes)

    @property
    def numeric(self) -> bool:
        """Always a number or numeric array of one shape: it can be a canonical field."""
        return self.kinds == {NUMERIC} and len(self.shapes) == 1

    @property
    def changes(self) -> bool:
        return self.changed_on_step or self.changed_on_reset

    @property
    def dtype(self) -> str:
        """The dtype ``step`` stores (what a port computes in), else the reset's."""
        counts = self.dtypes_after_step or self.dtypes_after_reset
        return counts.most_common(1)[0][0]


def _whole(a: np.ndarray) -> np.ndarray:
    """Elementwise: a whole number (ints and bools always; floats when finite and integral)."""
    if a.dtype.kind in "biu":
        return np.ones(a.shape, dtype=bool)
    a64 = np.asarray(a, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(a64) & (a64 == np.round(a64))


@dataclass
class Probe:
    reference: str
    env_class: type
    observation_space: Any
    action_space: Any
    max_episode_steps: int | None
    attrs: dict[str, AttrStats]
    max_draws_per_step: int = 0
    """Most random numbers one step drew from the env's generators."""
    steps: int = 0
    episodes: int = 0
    terminated_seen: int = 0
    truncated_seen: int = 0
    truncated_at: set[int] = field(default_factory=set)
    """Episode lengths at which the env truncated an episode itself (no TimeLimit did)."""

    @property
    def source_file(self) -> Path | None:
        source = inspect.getsourcefile(self.env_class)
        return Path(source) if source else None


def env_factory(
    reference: str, root: Path = Path("."), options: dict[str, Any] | None = None
) -> Callable[[], Any]:
    """A function making one instance of ``reference`` the way its Driver does."""
    if reference.startswith("gymnasium:"):
        from envforge.backends.gym_ids import make_env

        env_id = reference.split(":", 1)[1]

        def make() -> Any:
            return make_env(env_id, options or {})

        make()  # fail early, with the one-line error
        return make
    from envforge.backends.python import reference_class
    from envforge.spec import installed_class_module

    if installed_class_module(reference) is not None:
        cls = reference_class(reference)
    else:
        cls = reference_class(_file_class(reference, root))
    return lambda: cls(**(options or {}))


def _file_class(reference: str, root: Path) -> str:
    """``file.py:Class`` with the file relative to ``root``."""
    path_text, sep, class_name = reference.rpartition(":")
    if not sep or not path_text.endswith(".py"):
        raise BadInput(
            "init drafts gymnasium:<id>, gymnasium:<module>:<id>, file.py:Class and "
            f"pkg.module:Class references, got {reference!r}"
        )
    path = Path(path_text) if Path(path_text).is_absolute() else root / path_text
    return f"{path}:{class_name}"


def probe(
    reference: str, make: Callable[[], Any], episodes: int = 24, max_steps: int = 4000
) -> Probe:
    """Roll ``episodes`` random episodes (uniform, then sticky actions in turn) (at most ``max_steps`` steps in all) and watch."""
    env = make()
    missing = [a for a in ("observation_space", "action_space") if not hasattr(env, a)]
    if missing:
        raise BadInput(
            f"{reference}: init reads the observation and action spaces from the env, and it "
            f"has no {' or '.join(missing)} (gymnasium's spaces); write the spec by hand "
            "(docs/SPEC.md)"
        )
    time_limit = find_time_limit(env)
    stats: dict[str, AttrStats] = {}
    result = Probe(
        reference=reference,
        env_class=type(core(env)),
        observation_space=env.observation_space,
        action_space=env.action_space,
        max_episode_steps=None if time_limit is None else int(time_limit._max_episode_steps),
        attrs=stats,
    )
    env.action_space.seed(0)
    sticky = np.random.default_rng(0)
    # after resets the whole state is compared with the last reset's; after steps, objects
    # that are no numbers are compared by identity (a change in place shows at the next reset)
    last_reset: dict[str, Value] | None = None
    previous: dict[str, Value] | None = None
    cap = result.max_episode_steps or 1000
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        last_reset = _record(stats, snapshot(env, time_limit), last_reset, False, obs)
        previous = snapshot(env, time_limit, shallow=True)
        result.episodes += 1
        action = env.action_space.sample()
        for length in range(1, cap + 1):
            # odd episodes repeat actions (p = 0.9): long runs reach states far from the reset
            if episode % 2 == 0 or sticky.random() > 0.9:
                action = env.action_space.sample()
            # the env's generators are stood in for during the step, to count its draws
            log = RowLog()
            with recording(core(env), result.steps, log):
                obs, _, terminated, truncated, _ = env.step(action)
            result.max_draws_per_step = max(result.max_draws_per_step, len(log.draws))
            shallow = snapshot(env, time_limit, shallow=True)
            previous = _record(stats, shallow, previous, True, obs)
            result.steps += 1
            result.terminated_seen += bool(terminated)
            result.truncated_seen += bool(truncated)
            if truncated and time_limit is None:
                result.truncated_at.add(length)
            if terminated or truncated or result.steps >= max_steps:
                break
        if result.steps >= max_steps and episode >= 3:
            break
    if callable(getattr(env, "close", None)):
        env.close()
    return result


def _record(
    stats: dict[str, AttrStats],
    snap: dict[str, Value],
    previous: dict[str, Value] | None,
    after_step: bool,
    obs: Any,
) -> dict[str, Value]:
    obs_array = np.asarray(obs)
    for name, value in snap.items():
        entry = stats.setdefault(name, AttrStats(name))
        entry.see(value, after_step, obs_array)
        if previous is not None and (name not in previous or not previous[name].same_as(value)):
            if after_step:
                entry.changed_on_step = True
            else:
                entry.changed_on_reset = True
    return snap


def state_attributes(p: Probe) -> tuple[list[AttrStats], list[tuple[str, str]]]:
    """Numeric attributes that change (canonical candidates), and the other changing
    attributes with why each cannot be a field as it is."""
    candidates: list[AttrStats] = []
    left_out: list[tuple[str, str]] = []
    moving = {n.rsplit(".", 1)[0] for n, s in p.attrs.items() if "." in n and s.changes}
    # None at times, an object (snapshotted as its attributes, ``carrying.init_pos``) at others
    holders = {n.rsplit(".", 1)[0] for n in p.attrs if "." in n}
    absent_at_times = {n for n, s in p.attrs.items() if NONE in s.kinds and n in holders}
    for name, s in p.attrs.items():
        owner = next((a for a in absent_at_times if name.startswith(a + ".")), None)
        if owner is not None:  # no field can be read through an object that is not there
            continue
        if name in absent_at_times:
            left_out.append((name, none_at_times(name, "")))
            continue
        # a moving body's awake flag, even if never seen asleep: sleep is how a body comes to
        # rest (and what LunarLander's landing ends on)
        asleep_unseen = name.endswith(".awake") and name.rsplit(".", 1)[0] in moving
        if (not s.changes and not asleep_unseen) or name == ELAPSED_STEPS:
            continue
        if s.kinds == {RNG} or name == "_np_random_seed":
            continue  # the RNG and the seed it was made from: the spec's [rng] mode
        if s.numeric or (s.variable_list and s.low is not None):
            candidates.append(s)
        elif NONE in s.kinds and s.kinds <= {NONE, NUMERIC}:
            left_out.append((name, "None at times (e.g. after reset), a number at others"))
        elif NONE in s.kinds:
            left_out.append((name, none_at_times(name, s.type_name)))
        elif NUMERIC in s.kinds and len(s.shapes) > 1:
            shapes = ", ".join(str(list(x)) for x in sorted(s.shapes))
            left_out.append((name, f"changes size ({shapes}): needs a fixed array and a count"))
        else:
            left_out.append((name, f"a {s.type_name or 'non-numeric'} object, not a number"))
    return candidates, left_out


def none_at_times(name: str, type_name: str | None) -> str:
    """Why an attribute that is None at times and an object at others is left out, and what a
    person would write for it."""
    what = f"a {type_name}" if type_name else "an object"
    return (
        f"None at times, {what} at others: its fields are not read through it (a presence "
        "flag plus the object's fields would carry it; specs cannot say that yet)"
    )


def rebuilt_on_reset(p: Probe) -> list[str]:
    """Objects (no numbers) that a gymnasium env's reset replaces: what it builds from the
    seed that no field can carry (LunarLander's Box2D world and terrain)."""
    if not hasattr(p.env_class, "np_random_seed"):
        return []
    return [n for n, s in p.attrs.items() if OTHER in s.kinds and s.changed_on_reset]
