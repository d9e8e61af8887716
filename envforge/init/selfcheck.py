"""The self-check: is the spec's canonical state the reference's whole state?

The reference is verified against itself through the canonical state. One side is the
original, stepped directly (``live.LiveBatch``); the other is the reference Driver, which
writes a canonical state into a freshly reset instance, steps it and reads it back, exactly as
every level of ``verify`` drives it. Both get the same actions, and are compared as ``verify``
compares a port (the spec's comparison mode and tolerances):

* L1, one step from every state the original reaches (the Driver re-synced each step);
* L2, sequences of ``segment`` steps the Driver runs on its own state from a reached state;
* L3, whole episodes the Driver runs on its own state from the reset.

A field left out (a hidden counter, a cached value, an RNG that ``step`` draws from) makes
them differ. The finding then names the attributes outside the canonical state that explain
it: those whose value, copied from the original into the reloaded instance, makes the step
agree (``live.outside_state``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.base import State, Transition, take_state
from envforge.backends.gymnasium import GymnasiumDriver
from envforge.backends.recipe import build_driver, reference_recipe
from envforge.errors import BadInput, ContractViolation
from envforge.init.live import LiveBatch, first_row
from envforge.spec import EnvSpec
from envforge.verify.compare import Diff, compare_transitions, values_close
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.policies import rollout_policies

STEP_CAP = 1000
"""Episodes of the self-check stop here by default (pong's random games last ~3000 steps)."""
LEVELS = {
    1: "one step from each reached state",
    2: "sequences from reached states",
    3: "whole episodes from the reset",
}


@dataclass(frozen=True)
class SelfCheckConfig:
    episodes: int = 8
    """Episodes per policy (uniform random, sticky random, the spec's scripted policies)."""
    segment: int = 8
    """L2: steps the Driver runs on its own state before it is re-synced to the original."""
    max_steps: int | None = None
    """Steps per episode at most (default: the spec's episode cap, at most ``STEP_CAP``)."""
    seed: int = 0


@dataclass
class SelfCheckResult:
    env: str
    levels: dict[int, str] = field(default_factory=dict)
    """Level -> ``pass`` or ``fail``."""
    findings: list[Finding] = field(default_factory=list)
    steps: int = 0
    """Steps of the original compared (each compared at every level still passing)."""
    wall_s: float = 0.0
    observe_skipped: str = ""
    """Why reached states' observations were not compared (the Driver cannot observe)."""

    @property
    def passed(self) -> bool:
        return all(status == "pass" for status in self.levels.values())

    def summary(self) -> str:
        verdict = "passes" if self.passed else "FAILS"
        levels = ", ".join(f"L{lv} {s}" for lv, s in sorted(self.levels.items()))
        return (
            f"self-check {verdict} for {self.env} ({levels}; {self.steps} steps, "
            f"{self.wall_s:.1f} s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "passed": self.passed,
            "levels": {f"L{k}": v for k, v in sorted(self.levels.items())},
            "steps": self.steps,
            "wall_s": round(self.wall_s, 3),
            "findings": [f.to_dict() for f in self.findings],
        }


def reference_driver(spec: EnvSpec) -> Any:
    """The spec's reference, in this process (the self-check reaches inside its instances):
    a ``GymnasiumDriver`` (gymnasium and Python references) or a ``CDriver``."""
    from envforge.backends.c import CDriver

    driver = build_driver(reference_recipe(spec))
    if not isinstance(driver, GymnasiumDriver | CDriver):
        driver.close()
        raise BadInput(
            f"{spec.name}: the self-check supports gymnasium, Python and C references, not "
            f"{spec.reference_kind}"
        )
    return driver


def live_batch(driver: Any, n: int) -> Any:
    """The original reference beside ``driver``: live instances, or whole C structs."""
    if isinstance(driver, GymnasiumDriver):
        return LiveBatch(driver, n)
    from envforge.init.c_live import CLive

    return CLive(driver, n)


def self_check(spec: EnvSpec, config: SelfCheckConfig | None = None) -> SelfCheckResult:
    """Run L1–L3 of the reference against itself through ``spec``'s canonical state."""

    config = config or SelfCheckConfig()
    if spec.reference_kind == "pettingzoo":
        from envforge.init.seats_selfcheck import seat_self_check

        return seat_self_check(spec, config)
    start = time.perf_counter()
    result = SelfCheckResult(env=spec.name, levels={lv: "pass" for lv in LEVELS})
    driver = reference_driver(spec)
    live = live_batch(driver, config.episodes)
    try:
        rng = np.random.default_rng([config.seed, 19])
        for k, policy in enumerate(rollout_policies(spec, rng)):
            seeds = np.arange(config.episodes) + config.seed * 100_003 + k * config.episodes
            _episodes(spec, driver, live, policy, seeds.astype(np.uint32), config, result)
            if not result.passed and all(s == "fail" for s in result.levels.values()):
                break
    finally:
        live.close()
        driver.close()
    result.wall_s = time.perf_counter() - start
    return result


def _episodes(
    spec: EnvSpec,
    driver: Any,
    live: Any,
    policy: Any,
    seeds: np.ndarray,
    config: SelfCheckConfig,
    result: SelfCheckResult,
) -> None:
    """One batch of episodes under ``policy``; records the first failure of each level."""
    n = len(seeds)
    state, obs = live.reset(seeds)
    chains: dict[int, State] = {2: state, 3: state}  # the Driver's own states (L2, L3)
    rows = np.arange(n)
    history: list[np.ndarray] = []
    policy.reset(n)
    for t in range(config.max_steps or min(spec.episode_cap, STEP_CAP)):
        acts = policy.act(obs, np.full(len(rows), t))
        full = np.zeros((n, *spec.action.shape), dtype=spec.action.dtype)
        full[rows] = acts
        history.append(full)
        if t % config.segment == 0:
            chains[2] = state
        try:
            stepped = {1: driver.step(state, acts)} if result.levels[1] == "pass" else {}
            for level in (2, 3):
                if result.levels[level] == "pass":
                    stepped[level] = driver.step(chains[level], acts)
        except ContractViolation as e:  # e.g. draws inside step the spec does not declare
            result.levels = {level: "fail" for level in LEVELS}
            result.findings.append(
                Finding(level=1, check="selfcheck.contract", message=f"self-check: {e}")
            )
            return
        expected = live.step(rows, acts, state)
        result.steps += len(rows)
        for level, got in stepped.items():
            before = state if level == 1 else chains[level]
            diff = compare_transitions(spec, expected, got, before, acts)
            i = diff.first()
            if i is not None:
                result.levels[level] = "fail"
                result.findings.append(
                    _finding(
                        spec,
                        driver,
                        live,
                        level,
                        diff,
                        i,
                        rows,
                        seeds,
                        history,
                        before,
                        acts,
                        expected,
                        got,
                        policy.name,
                        t,
                    )
                )
                # explaining it replayed the original to before this step: bring it back
                env = int(rows[i])
                live.replay(env, int(seeds[env]), [h[env] for h in history])
        if result.levels[1] == "pass" and not result.observe_skipped:  # a step's finding first
            _check_observe(spec, driver, expected, rows, seeds, history, policy.name, t, result)
        keep = ~(expected.terminated | expected.truncated)
        rows = rows[keep]
        if not len(rows) or all(s == "fail" for s in result.levels.values()):
            return
        state = take_state(expected.state, keep)
        for level in (2, 3):
            if level in stepped:
                chains[level] = take_state(stepped[level].state, keep)
        obs = expected.obs[keep]


def _check_observe(
    spec: EnvSpec,
    driver: Any,
    expected: Transition,
    rows: np.ndarray,
    seeds: np.ndarray,
    history: list[np.ndarray],
    policy: str,
    t: int,
    result: SelfCheckResult,
) -> None:
    """L1 also asks the Driver for the observation of each reached canonical state (what
    ``observe`` and every level's observation of an injected state rest on): it must be the
    observation the original returned. A field the observation reads that the draft left out
    (or never found) makes them differ."""
    try:
        seen = np.asarray(driver.observe(expected.state))
    except Exception as e:  # no way to observe a state (no _get_obs): verify's L0 says so
        result.observe_skipped = f"{type(e).__name__}: {e}"
        return
    atol, rtol = spec.tolerance(None)
    close = values_close(expected.obs, seen.astype(expected.obs.dtype), atol, rtol)
    bad = np.flatnonzero(~close.reshape(len(close), -1).all(axis=1))
    if not len(bad):
        return
    i = int(bad[0])
    env = int(rows[i])
    result.levels[1] = "fail"
    result.findings.append(
        Finding(
            level=1,
            check="selfcheck.observe",
            message=(
                f"self-check L1 ({LEVELS[1]}): policy {policy}, seed {int(seeds[env])}, step "
                f"{t}: the observation of the reached state, written into a fresh instance, "
                "differs from the one the original returned: the observation reads state the "
                "canonical fields do not carry"
            ),
            fields=["obs"],
            seed=int(seeds[env]),
            step=t,
            actions=[to_jsonable(h[env]) for h in history],
            state_before=_row(first_row(expected.state, i)),
            expected={"obs": to_jsonable(expected.obs[i])},
            actual={"obs": to_jsonable(seen[i])},
        )
    )


def _finding(
    spec: EnvSpec,
    driver: Any,
    live: Any,
    level: int,
    diff: Diff,
    i: int,
    rows: np.ndarray,
    seeds: np.ndarray,
    history: list[np.ndarray],
    before: State,
    acts: np.ndarray,
    expected: Transition,
    got: Transition,
    policy: str,
    t: int,
) -> Finding:
    env = int(rows[i])
    keys = diff.keys_at(i)
    live.replay(env, int(seeds[env]), [h[env] for h in history[:-1]])
    live_before = live.read(np.array([env]))
    causes, others, values = live.explain(env, live_before, acts[i], expected.take(i))
    if causes:
        why = (
            "; outside the canonical state, "
            + ", ".join(
                f"{n} ({values[n][0]} on the original, {values[n][1]} after reload)" for n in causes
            )
            + (" explains it" if len(causes) == 1 else " explain it together")
        )
    elif others:
        untested = [n for n in others if "not tested" in values[n][0]]
        why = f"; outside the canonical state {', '.join(others)} differ, but none explains it"
        if untested:
            why += f" ({', '.join(untested)} cannot be copied to test: make them fields)"
    else:
        why = (
            "; nothing outside the canonical state differs: the canonical state changes the "
            "values it carries (a dtype or range that does not round-trip?)"
        )
    if level > 1:
        why += f" (the Driver's own state before this step: {_row(first_row(before, i))})"
    message = (
        f"self-check L{level} ({LEVELS[level]}): policy {policy}, seed {int(seeds[env])}, "
        f"step {t}: stepping through the canonical state differs from the original in "
        f"{', '.join(keys)}{why}"
    )
    return Finding(
        level=level,
        check="selfcheck.outside_state" if causes else "selfcheck.mismatch",
        message=message,
        fields=keys,
        seed=int(seeds[env]),
        step=t,
        actions=[to_jsonable(h[env]) for h in history],
        state_before=_row(live_before),
        expected=to_jsonable({k: _value(expected, k, i) for k in keys}),
        actual=to_jsonable({k: _value(got, k, i) for k in keys}),
        extra={"outside_state": causes, "also_differ": others, "policy": policy},
    )


def _row(state: State) -> dict[str, Any]:
    return to_jsonable({k: v[0] for k, v in state.items()})


def _value(tr: Transition, key: str, i: int) -> Any:
    return tr.state[key][i] if key in tr.state else getattr(tr, key)[i]
