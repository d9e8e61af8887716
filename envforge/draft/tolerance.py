"""Tolerances a draft proposes: measured, never guessed.

``propose_tolerance``: float state is compared within this many times the change one float32
rounding of the state makes in a step. ``propose_reload_tolerance``: where stepping through the
canonical state does not reproduce the reference exactly (state it keeps that no attribute
reaches, such as Box2D's contact caches), the tolerance covers the measured gap of most steps
and the draft says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from envforge.backends.base import Transition
from envforge.draft.fields import FieldDraft
from envforge.draft.selfcheck import reference_driver
from envforge.rng.draws import row_seeds
from envforge.spec import EnvSpec

if TYPE_CHECKING:
    from envforge.draft.draft import Draft

NOISE_FACTOR = 100.0
"""Proposed tolerance = this times the change one float32 rounding of the state makes in a
step: a float32 port rounds at every operation, not once."""
F32_EPS = 2.0**-24
RELOAD_FACTOR = 10.0
"""Where stepping through the canonical state does not reproduce the reference exactly (state
it keeps that no attribute reaches), tolerance = this times the gap of 99 % of the steps."""
RELOAD_QUANTILE = 99.0


def _nice_up(value: float) -> float:
    """``value`` rounded up to one significant digit (3.2e-7 -> 4e-7)."""
    if value <= 0:
        return 0.0
    exponent = math.floor(math.log10(value))
    return float(f"{math.ceil(value / 10**exponent - 1e-9)}e{exponent}")


def propose_tolerance(draft: Draft, n: int = 64, steps: int = 24) -> None:
    """Per float field: how far one float32 rounding of the state moves a step's result."""
    floats = [f for f in draft.fields if f.dtype.startswith("float")]
    if not floats:
        return
    spec = draft.spec()
    driver = reference_driver(spec)
    rng = np.random.default_rng(19)
    noise = {f.name: 0.0 for f in floats} | {"obs": 0.0, "reward": 0.0}
    repeatable = True
    try:
        from envforge.verify.policies import random_actions

        state = driver.reset(np.arange(n, dtype=np.uint32))
        for _ in range(steps):
            acts = random_actions(spec, rng, n)
            # both steps draw the same numbers (seeded by the unmoved state), if step draws
            seeds = row_seeds(state, acts)
            exact, _ = driver.step_draws(state, acts, seeds, None)
            again, _ = driver.step_draws(state, acts, seeds, None)
            if not _same(exact, again):
                repeatable = False  # the state does not decide the step: no noise to measure
                break
            nudged = dict(state)
            for f in floats:
                sign = rng.choice([-1.0, 1.0], size=state[f.name].shape)
                nudged[f.name] = state[f.name] * (1 + sign * F32_EPS)
            moved, _ = driver.step_draws(nudged, acts, seeds, None)
            _widen(noise, exact, moved, floats)
            live = ~(exact.terminated | exact.truncated)
            if not live.any():
                break
            state = {k: v[live] for k, v in exact.state.items()}
            n = int(live.sum())
    finally:
        driver.close()
    if not repeatable:
        draft.compare |= {"atol": 1e-6, "rtol": 0.0}
        draft.compare_note += (
            "; no tolerance measured: stepping one canonical state twice gave two results (the "
            "self-check shows what is missing), so atol is a placeholder"
        )
        return
    for f in floats:
        f.atol = _nice_up(NOISE_FACTOR * noise[f.name]) or None
    overall = max([noise["obs"], noise["reward"], *(noise[f.name] for f in floats)])
    draft.compare["atol"] = _nice_up(NOISE_FACTOR * overall) or 1e-6
    draft.compare["rtol"] = 0.0
    draft.compare_note += (
        f"; tolerances measured: {NOISE_FACTOR:g} x the largest change one float32 rounding "
        "of the state makes in a step (plus the float32 rounding of the result)"
    )


def reload_gaps(
    spec: EnvSpec, episodes: int = 4, max_steps: int = 250
) -> tuple[dict[str, np.ndarray], int]:
    """Per float field (and obs, reward): the gap, one step at a time, between the reference
    stepped directly and stepped through the canonical state (written into a fresh instance),
    from the states of uniform random episodes; and the number of steps seen."""
    from envforge.backends.base import take_state
    from envforge.backends.gymnasium import GymnasiumDriver
    from envforge.draft.live import LiveBatch
    from envforge.verify.policies import UniformPolicy

    driver = reference_driver(spec)
    if not isinstance(driver, GymnasiumDriver):
        driver.close()
        return {}, 0
    live = LiveBatch(driver, episodes)
    keys = [f.name for f in spec.state if f.np_dtype.kind == "f"] + ["obs", "reward"]
    gaps: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    steps = 0
    try:
        policy = UniformPolicy(spec, np.random.default_rng(23))
        state, obs = live.reset(np.arange(episodes, dtype=np.uint32) + 1000)
        rows = np.arange(episodes)
        policy.reset(episodes)
        for t in range(min(max_steps, spec.episode_cap)):
            acts = policy.act(obs, np.full(len(rows), t))
            got = driver.step(state, acts)
            expected = live.step(rows, acts, state)
            steps += len(rows)
            for k in keys:
                a = expected.state[k] if k in expected.state else getattr(expected, k)
                b = got.state[k] if k in got.state else getattr(got, k)
                gap = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                gaps[k].append(gap.reshape(len(rows), -1).max(axis=1))
            keep = ~(expected.terminated | expected.truncated)
            rows = rows[keep]
            if not len(rows):
                break
            state, obs = take_state(expected.state, keep), expected.obs[keep]
    finally:
        live.close()
        driver.close()
    return {k: np.concatenate(v) for k, v in gaps.items() if v}, steps


def propose_reload_tolerance(draft: Draft) -> None:
    """A reference that does not reproduce itself through its canonical state, by small
    amounts: state it keeps where no attribute reaches (a physics engine's warm-starting
    impulses). Tolerances are widened to the gaps of most steps, and the comment says so."""
    if draft.compare.get("mode") != "tolerance":
        return
    gaps, steps = reload_gaps(draft.spec())
    if not steps or not any(g.max(initial=0.0) > 0 for g in gaps.values()):
        return
    floats = {f.name: f for f in draft.fields if f.dtype.startswith("float")}
    worst: list[str] = []
    for key, gap in gaps.items():
        gap = gap[np.isfinite(gap)]
        if not gap.size or gap.max() == 0:
            continue
        usual = float(np.percentile(gap, RELOAD_QUANTILE))
        tol = _nice_up(RELOAD_FACTOR * usual)
        if key in floats:
            floats[key].atol = max(floats[key].atol or 0.0, tol) or None
        else:
            draft.compare["atol"] = max(float(draft.compare.get("atol", 0.0)), tol)
        worst.append(f"{key} {gap.max():.2g} ({RELOAD_QUANTILE:g}% within {usual:.2g})")
    draft.compare_note += (
        f"; GUESS: stepping the reference through its canonical state (written into a fresh "
        f"instance) does not reproduce stepping it directly: over {steps} steps of uniform "
        f"random episodes the one-step gap was at most {', '.join(worst)}. It keeps state no "
        "attribute reaches (a physics engine's caches: Box2D's contact and joint impulses, "
        f"its broad phase, its sleep timers). Tolerances are {RELOAD_FACTOR:g} x the gap of "
        f"{RELOAD_QUANTILE:g}% of the steps, so the largest gaps still fail the self-check: "
        "review them (docs/SPEC.md, 'State no attribute reaches')"
    )


def _same(a: Transition, b: Transition) -> bool:
    pairs = [(a.obs, b.obs), (a.reward, b.reward), (a.terminated, b.terminated)]
    pairs += [(a.state[k], b.state[k]) for k in a.state]
    return all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in pairs)


def _widen(noise: dict, exact: Transition, moved: Transition, floats: list[FieldDraft]) -> None:
    def size(a: np.ndarray, b: np.ndarray) -> float:
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        gap = np.abs(a64 - b64) + np.abs(a64) * F32_EPS
        gap = gap[np.isfinite(gap)]
        return float(gap.max()) if gap.size else 0.0

    for f in floats:
        noise[f.name] = max(noise[f.name], size(exact.state[f.name], moved.state[f.name]))
    noise["obs"] = max(noise["obs"], size(exact.obs, moved.obs))
    noise["reward"] = max(noise["reward"], size(exact.reward, moved.reward))
