"""Tolerances a draft proposes: measured, never guessed.

``propose_tolerance``: float state is compared within this many times the change one float32
rounding of the state makes in a step. ``propose_reload_tolerance``: where stepping through the
canonical state does not reproduce the reference exactly (state it keeps that no attribute
reaches, such as Box2D's contact caches), the tolerance covers the measured gap of most steps
and the draft says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from envforge.backends.base import Transition
from envforge.init.fields import FieldDraft
from envforge.init.selfcheck import reference_driver
from envforge.rng.draws import row_seeds
from envforge.spec import EnvSpec

if TYPE_CHECKING:
    from envforge.init.draft import Draft

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
    """Per float field, and for the observation and reward: how far one float32 rounding of the
    state moves a step's result (what a float32 port's arithmetic can move it by), times
    ``NOISE_FACTOR``, capped at ``SCALE_FRACTION`` of the values' own scale.

    Whole-number fields (ints, bools, a 0/1 map kept as floats) are exact and are not nudged
    (a float32 port holds a whole number exactly). A nudged step whose whole-number outcome
    changes (a flag, a counter, a map cell: a threshold crossed) is no float error and is left
    out of the measurement. The observation and the reward get the tolerance measured on them,
    never a state field's (``[compare] atol`` applies to both of them, and to no field)."""
    floats = [f for f in draft.fields if f.dtype.startswith("float")]
    for f in floats:
        f.atol = 0.0 if f.integral else None
    inexact = [f for f in floats if not f.integral]
    if not inexact:
        return
    m = measure_noise(draft, inexact, n, steps)
    if m is None:
        for f in inexact:
            f.atol = 0.0
        draft.compare |= {"atol": 0.0, "rtol": 0.0}
        draft.compare_note += (
            "; no tolerance measured: stepping one canonical state twice gave two results (the "
            "self-check shows what is missing), so every tolerance is 0: set them by hand"
        )
        return
    capped = []
    for f in inexact:
        f.atol, was_capped = _bounded(m.noise[f.name], f.scale)
        capped += [f.name] if was_capped else []
    draft.scales = {"obs": m.obs_scale, "reward": m.reward_scale}
    scale = _reload_scale(draft, "obs")
    both = max(m.noise["obs"], m.noise["reward"])
    atol, was_capped = _bounded(both, scale)
    capped += ["obs/reward"] if was_capped else []
    draft.compare["atol"] = atol
    draft.compare["rtol"] = 0.0
    draft.compare_note += (
        f"; tolerances measured: {NOISE_FACTOR:g} x the largest change one float32 rounding "
        "of the float state makes in a step (plus the float32 rounding of the result), per "
        f"field, over {m.steps} steps of uniform random episodes; never more than "
        f"{SCALE_FRACTION:.0%} of the largest magnitude the values took"
    )
    draft.compare_note += (
        f". atol here is the observation's and reward's (measured on them: obs {m.noise['obs']:.2g}, "
        f"reward {m.noise['reward']:.2g}); every float field has its own atol, whole-number "
        "fields are exact"
    )
    if m.flipped:
        draft.compare_note += (
            f"; {m.flipped} nudged steps changed a whole-number outcome (a flag or a counter: "
            "a threshold crossed), which is no float error: left out of the measurement"
        )
    if capped:
        draft.compare_note += (
            f"; capped at {SCALE_FRACTION:.0%} of their scale: {', '.join(capped)}"
        )


SCALE_FRACTION = 0.01
"""A drafted tolerance is at most this part of the largest magnitude its values took: wider,
and a port off by that much would pass."""


def _bounded(noise: float, scale: float) -> tuple[float, bool]:
    """``NOISE_FACTOR`` x the measured noise, at most ``SCALE_FRACTION`` x ``scale``; and
    whether the cap cut it."""
    want = _nice_up(NOISE_FACTOR * noise)
    cap = SCALE_FRACTION * scale
    if want > cap:
        return float(f"{cap:.1e}"), True
    return want, False


@dataclass
class Noise:
    noise: dict[str, float]
    """Per float field, ``obs`` and ``reward``: the largest change a float32 rounding made."""
    obs_scale: float = 0.0
    reward_scale: float = 0.0
    steps: int = 0
    flipped: int = 0
    """Nudged steps whose whole-number outcome changed (left out)."""


def measure_noise(draft: Draft, floats: list[FieldDraft], n: int, steps: int) -> Noise | None:
    """The change one float32 rounding of ``floats`` makes in a step (None: stepping one
    canonical state twice gave two results, so nothing can be measured)."""
    spec = draft.spec()
    driver = reference_driver(spec)
    rng = np.random.default_rng(19)
    m = Noise({f.name: 0.0 for f in floats} | {"obs": 0.0, "reward": 0.0})
    whole = [f.name for f in draft.fields if f.exact]
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
                return None  # the state does not decide the step: no noise to measure
            nudged = dict(state)
            for f in floats:
                sign = rng.choice([-1.0, 1.0], size=state[f.name].shape)
                nudged[f.name] = state[f.name] * (1 + sign * F32_EPS)
            moved, _ = driver.step_draws(nudged, acts, seeds, None)
            same = _same_outcome(exact, moved, whole)
            m.flipped += int((~same).sum())
            m.steps += len(acts)
            _widen(m.noise, exact, moved, floats, same)
            m.obs_scale = max(m.obs_scale, _largest(exact.obs))
            m.reward_scale = max(m.reward_scale, _largest(exact.reward))
            live = ~(exact.terminated | exact.truncated)
            if not live.any():
                break
            state = {k: v[live] for k, v in exact.state.items()}
            n = int(live.sum())
    finally:
        driver.close()
    return m


def _largest(a: np.ndarray) -> float:
    a = np.abs(np.asarray(a, np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def _same_outcome(a: Transition, b: Transition, whole: list[str]) -> np.ndarray:
    """Per row: the flags and every whole-number field agree (no threshold was crossed)."""
    same = (a.terminated == b.terminated) & (a.truncated == b.truncated)
    for k in whole:
        x, y = np.asarray(a.state[k]), np.asarray(b.state[k])
        same &= (x == y).reshape(len(x), -1).all(axis=1)
    return np.asarray(same, dtype=bool)


def reload_gaps(
    spec: EnvSpec, episodes: int = 4, max_steps: int = 250
) -> tuple[dict[str, np.ndarray], int]:
    """Per float field (and obs, reward): the gap, one step at a time, between the reference
    stepped directly and stepped through the canonical state (written into a fresh instance),
    from the states of uniform random episodes; and the number of steps seen."""
    from envforge.backends.base import take_state
    from envforge.backends.gymnasium import GymnasiumDriver
    from envforge.init.live import LiveBatch
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
        worst.append(f"{key} {gap.max():.2g} ({RELOAD_QUANTILE:g}% within {usual:.2g})")
        if key in floats:
            f = floats[key]
            if f.integral:
                continue  # a whole-number field stays exact: the self-check names the gap
            f.atol = max(f.atol or 0.0, min(tol, SCALE_FRACTION * f.scale))
        else:
            scale = _reload_scale(draft, key)
            draft.compare["atol"] = max(
                float(draft.compare.get("atol", 0.0)), min(tol, SCALE_FRACTION * scale)
            )
    draft.compare_note += (
        f"; GUESS: stepping the reference through its canonical state (written into a fresh "
        f"instance) does not reproduce stepping it directly: over {steps} steps of uniform "
        f"random episodes the one-step gap was at most {', '.join(worst)}. It keeps state no "
        "attribute reaches (a physics engine's caches: Box2D's contact and joint impulses, "
        f"its broad phase, its sleep timers). Tolerances are {RELOAD_FACTOR:g} x the gap of "
        f"{RELOAD_QUANTILE:g}% of the steps (at most {SCALE_FRACTION:.0%} of the values' "
        "scale; whole-number fields stay exact), so the largest gaps still fail the self-check: "
        "review them (docs/SPEC.md, 'State no attribute reaches')"
    )


def _reload_scale(draft: Draft, key: str) -> float:
    """The scale the observation and reward took in ``propose_tolerance``'s measurement (the
    smaller one that is not 0: their tolerance is one ``atol``)."""
    scales = [v for v in draft.scales.values() if v > 0]
    return min(scales) if scales else 0.0


def _same(a: Transition, b: Transition) -> bool:
    pairs = [(a.obs, b.obs), (a.reward, b.reward), (a.terminated, b.terminated)]
    pairs += [(a.state[k], b.state[k]) for k in a.state]
    return all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in pairs)


def _widen(
    noise: dict, exact: Transition, moved: Transition, floats: list[FieldDraft], rows: np.ndarray
) -> None:
    """Widen each key's noise to the largest change over ``rows`` (the steps whose whole-number
    outcome did not change)."""

    def size(a: np.ndarray, b: np.ndarray) -> float:
        a64, b64 = np.asarray(a, np.float64)[rows], np.asarray(b, np.float64)[rows]
        gap = np.abs(a64 - b64) + np.abs(a64) * F32_EPS
        gap = gap[np.isfinite(gap)]
        return float(gap.max()) if gap.size else 0.0

    for f in floats:
        noise[f.name] = max(noise[f.name], size(exact.state[f.name], moved.state[f.name]))
    noise["obs"] = max(noise["obs"], size(exact.obs, moved.obs))
    noise["reward"] = max(noise["reward"], size(exact.reward, moved.reward))
