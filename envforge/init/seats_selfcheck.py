"""The self-check of a PettingZoo spec: the reference against itself through the canonical
state. A live env plays whole games through ``agent_iter`` as its users play it, never written
to; beside it the driver steps through the spec's state:

- L1: one step from each state the live env reached (read from it, written into a fresh one);
- L3: whole games on the driver's own states from the reset.

Every step's state and every agent's observation must be the live env's. A difference means the
canonical state misses (or misplaces) something the rules read: the finding names the fields.
Games of random legal moves, then of uniform actions (illegal moves included).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from envforge.backends.attrs import stack_rows
from envforge.backends.pettingzoo import PettingZooDriver, split_observation
from envforge.init.selfcheck import SelfCheckConfig, SelfCheckResult
from envforge.spec import EnvSpec
from envforge.verify.compare import compare_states
from envforge.verify.findings import Finding, to_jsonable

LEVELS = (1, 3)
STEP_CAP = 1000


def seat_self_check(spec: EnvSpec, config: SelfCheckConfig) -> SelfCheckResult:
    start = time.perf_counter()
    driver = PettingZooDriver(spec, spec.reference.split(":", 1)[1])
    result = SelfCheckResult(env=spec.name, levels=dict.fromkeys(LEVELS, "pass"))
    try:
        for k, uniform in enumerate((False, True)):
            for e in range(config.episodes):
                seed = config.seed * 100_003 + k * config.episodes + e
                _game(spec, driver, seed, uniform, config, result)
                if not result.passed:
                    break
    finally:
        driver.close()
    result.wall_s = time.perf_counter() - start
    return result


def _read(spec: EnvSpec, driver: PettingZooDriver, live: Any) -> dict[str, np.ndarray]:
    return stack_rows(spec, [driver.read_row(live)])


def _game(
    spec: EnvSpec,
    driver: PettingZooDriver,
    seed: int,
    uniform: bool,
    config: SelfCheckConfig,
    result: SelfCheckResult,
) -> None:
    rng = np.random.default_rng([seed, 23])
    live = driver.factory(**spec.options)
    live.reset(seed=seed)
    reached = _read(spec, driver, live)
    own = driver.reset(np.asarray([seed], np.uint32))
    _compare(spec, 3, "reset", own, reached, result, [])
    actions: list[int] = []
    n = int(spec.action.n or 0)
    for _ in range(min(config.max_steps or spec.episode_cap, STEP_CAP)):
        obs, _, terminated, truncated, info = live.last()
        if terminated or truncated or not result.passed:
            break
        _, mask = split_observation(obs)
        mask = mask if mask is not None else info.get("action_mask")
        legal = np.flatnonzero(mask) if mask is not None else np.arange(n)
        action = int(rng.integers(0, n) if uniform or not len(legal) else rng.choice(legal))
        actions.append(action)
        batch = np.asarray([action], np.int32)
        one, free = driver.step(reached, batch), driver.step(own, batch)
        live.step(action)
        reached = _read(spec, driver, live)
        live_obs = driver.observation_of(live)[None]
        result.steps += 1
        _compare(spec, 1, "one step from the live state", one.state, reached, result, actions)
        if result.levels[1] == "pass" and not np.array_equal(one.obs, live_obs):
            result.levels[1] = "fail"
            result.findings.append(
                _finding(1, "observation", ["obs"], actions, to_jsonable(live_obs[0]))
            )
        _compare(spec, 3, "the driver's own game", free.state, reached, result, actions)
        own = free.state
        if bool(one.terminated[0] or one.truncated[0]):
            break
    live.close()


def _compare(
    spec: EnvSpec,
    level: int,
    how: str,
    got: dict[str, np.ndarray],
    live: dict[str, np.ndarray],
    result: SelfCheckResult,
    actions: list[int],
) -> None:
    if result.levels[level] != "pass":
        return
    keys = compare_states(spec, live, got, exact=True).keys_at(0)
    if keys:
        result.levels[level] = "fail"
        expected = {k: to_jsonable(live[k][0]) for k in keys}
        result.findings.append(_finding(level, how, keys, actions, expected))


def _finding(level: int, how: str, keys: list[str], actions: list[int], expected: Any) -> Finding:
    return Finding(
        level=level,
        check="selfcheck.mismatch",
        message=f"{how}: through the canonical state the reference differs from the live env "
        f"in {', '.join(keys)} (a state attribute the rules read is missing or written wrong)",
        fields=keys,
        actions=list(actions),
        expected={"live": expected},
    )
