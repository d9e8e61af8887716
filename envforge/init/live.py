"""The original reference, stepped directly: the side the self-check compares the Driver with.

A reference Driver is stateless from the caller's view: every step writes the canonical state
into a freshly reset instance, steps it and reads the state back. ``LiveBatch`` keeps real
instances alive instead and steps them with nothing written in, so any state the canonical
fields leave out (a hidden counter, a cached value, the RNG) carries over from step to step as
it does for a user of the reference.
"""

from __future__ import annotations

import copy
import re

import numpy as np

from envforge.backends.attrs import ELAPSED_STEPS, owner, refresh_contacts, set_value
from envforge.backends.base import State, Transition, batch_size
from envforge.backends.gymnasium import GymnasiumDriver, core
from envforge.init.snapshot import Value, differing, is_body, snapshot
from envforge.rng.draws import row_seeds
from envforge.rng.recorder import RowLog, recording


class LiveBatch:
    """``n`` instances of a gymnasium/Python reference, made the way its Driver makes them."""

    def __init__(self, driver: GymnasiumDriver, n: int) -> None:
        self.driver = driver
        self.envs = [driver.make_env() for _ in range(n)]
        self.time_limits = [driver.time_limit_of(env) for env in self.envs]

    def reset(self, seeds: np.ndarray) -> tuple[State, np.ndarray]:
        """Each env reset with its seed: the canonical states and the observations."""
        obs = [
            self.driver.obs_row(env.reset(seed=int(seed))[0])
            for env, seed in zip(self.envs, seeds, strict=True)
        ]
        return self.read(np.arange(len(seeds))), np.stack(obs)

    def read(self, rows: np.ndarray) -> State:
        from envforge.backends.attrs import stack_rows

        reads = [self.driver.attrs.read(core(self.envs[i]), self.time_limits[i]) for i in rows]
        return stack_rows(self.driver.spec, reads)

    def step(self, rows: np.ndarray, actions: np.ndarray, before: State) -> Transition:
        """Step envs ``rows`` (whose canonical states are ``before``) with ``actions``.

        Draws inside ``step`` come from the generator the Driver would hand the same state and
        action (``rng.draws.row_seeds``): with the whole state canonical, both draw alike."""
        n = len(rows)
        obs, reward = [], np.zeros(n)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        seeds = row_seeds(before, actions)
        for j, i in enumerate(rows):
            with recording(core(self.envs[i]), int(seeds[j]), RowLog()):
                o, r, term, trunc, _ = self.envs[i].step(self.driver.env_action(actions[j]))
            obs.append(self.driver.obs_row(o))
            reward[j], terminated[j], truncated[j] = float(r), bool(term), bool(trunc)
        return Transition(self.read(rows), np.stack(obs), reward, terminated, truncated)

    def snapshot(self, i: int) -> dict[str, Value]:
        return snapshot(self.envs[i], self.time_limits[i])

    def explain(
        self, i: int, before: State, action: np.ndarray, expected: Transition
    ) -> tuple[list[str], list[str], dict[str, tuple[str, str]]]:
        return outside_state(self.driver, self, i, before, action, expected)

    def replay(self, i: int, seed: int, actions: list[np.ndarray]) -> None:
        """Bring env ``i`` back to where it stood after ``actions`` from ``reset(seed)``."""
        self.envs[i].reset(seed=seed)
        for a in actions:
            self.step(np.array([i]), np.asarray(a)[None], self.read(np.array([i])))

    def close(self) -> None:
        for env in self.envs:
            if callable(getattr(env, "close", None)):
                env.close()


def mapped_attributes(driver: GymnasiumDriver) -> set[str]:
    """Attribute names the spec's canonical fields read and write."""
    names = set(driver.attrs.attributes)
    if driver.attrs.elapsed_field is not None:
        names.add(ELAPSED_STEPS)
    return names


def outside_state(
    driver: GymnasiumDriver,
    live: LiveBatch,
    i: int,
    before: State,
    action: np.ndarray,
    expected: Transition,
) -> tuple[list[str], list[str], dict[str, tuple[str, str]]]:
    """Why stepping env ``i`` through its canonical state ``before`` (one row) differs.

    ``live.envs[i]`` must be the original just before the step. Returns the attributes outside
    the canonical state that explain the difference (copying them into the reloaded instance
    makes its step agree), the other attributes that differ without mattering for this step,
    and each differing attribute's value on the original and after reload."""
    from envforge.verify.compare import compare_transitions

    original = live.snapshot(i)
    driver.load_row(0, before)
    reloaded = snapshot(driver.envs[0], driver.time_limits[0])
    mapped = mapped_attributes(driver)
    suspects = [n for n in differing(original, reloaded) if n not in mapped]
    suspects += unmapped_elements(driver, original, reloaded)
    values = {n: (_shown(original, n), _shown(reloaded, n)) for n in suspects}

    uncopyable: set[str] = set()

    def agrees_with(names: list[str]) -> bool:
        driver.load_row(0, before)
        for name in names:
            try:
                _copy_over(name, live, i, driver)
            except Exception:  # native handles (Box2D bodies) cannot be copied: not testable
                uncopyable.add(name)
                return False
        seed = int(row_seeds(before, np.asarray(action)[None])[0])
        with recording(core(driver.envs[0]), seed, RowLog()):
            o, r, term, trunc, _ = driver.envs[0].step(driver.env_action(action))
        got = Transition(
            {k: v[None] for k, v in driver.read_row(0).items()},
            driver.obs_row(o)[None],
            np.array([float(r)]),
            np.array([bool(term)]),
            np.array([bool(trunc)]),
        )
        return compare_transitions(driver.spec, expected, got).first() is None

    causes = [n for n in suspects if agrees_with([n])]
    if not causes and suspects and agrees_with(suspects):
        causes = list(suspects)  # no single attribute explains it; all of them together do
    others = [n for n in suspects if n not in causes]
    for name in uncopyable:
        values[name] = (values[name][0] + " (cannot be copied, so not tested)", values[name][1])
    return causes, others, values


_ELEMENT = re.compile(r"^(.+)\[(\d+)\]$")


def unmapped_elements(
    driver: GymnasiumDriver, original: dict[str, Value], reloaded: dict[str, Value]
) -> list[str]:
    """``name[i]`` for elements of an array attribute the spec maps only in part, which differ."""
    out = []
    for name, slots in driver.attrs.attributes.items():
        if slots[0].index is None or name not in original or name not in reloaded:
            continue
        a, b = original[name].payload, reloaded[name].payload
        if original[name].kind != "numeric" or reloaded[name].kind != "numeric":
            continue
        a, b = np.ravel(a), np.ravel(b)
        taken = {s.index for s in slots}
        for k in range(min(len(a), len(b))):
            if k not in taken and a[k] != b[k]:
                out.append(f"{name}[{k}]")
    return out


def _shown(snap: dict[str, Value], name: str) -> str:
    match = _ELEMENT.match(name)
    if match is not None:
        base, k = match.group(1), int(match.group(2))
        return repr(np.ravel(snap[base].payload)[k].item())
    return snap[name].show() if name in snap else "(absent)"


def _copy_over(name: str, live: LiveBatch, i: int, driver: GymnasiumDriver) -> None:
    """Copy one attribute (or one array element) from the original into the reloaded env."""
    target, source = core(driver.envs[0]), core(live.envs[i])
    match = _ELEMENT.match(name)
    if name == ELAPSED_STEPS:
        driver.time_limits[0]._elapsed_steps = live.time_limits[i]._elapsed_steps
    elif match is not None:
        base, k = match.group(1), int(match.group(2))
        to, attr = owner(target, base)
        array = np.array(getattr(to, attr))
        array.reshape(-1)[k] = np.ravel(np.asarray(getattr(owner(source, base)[0], attr)))[k]
        set_value(to, attr, array)
        refresh_contacts([to])
    else:
        to, attr = owner(target, name)
        value = getattr(owner(source, name)[0], attr)
        if is_body(to):  # a member of a body (a b2Vec2 is copied as its numbers)
            set_value(to, attr, value if isinstance(value, bool | int | float) else tuple(value))
            refresh_contacts([to])
        else:  # an attribute of the env, or of an object it holds (env.game.board)
            setattr(to, attr, copy.deepcopy(value))


def first_row(state: State, i: int) -> State:
    assert 0 <= i < batch_size(state)
    return {k: v[i : i + 1] for k, v in state.items()}
