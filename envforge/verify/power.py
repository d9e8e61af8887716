"""What a distribution-mode run could have detected (``[rng] step = "distribution"``).

An event (a spec ``[[event]]``, or any one value of an output) has probability ``p`` at a tested
state on the reference; the port's probability there is ``p + delta``. The run tests it with the
two-sample chi-square test on the 2 x 2 table (no continuity correction: ``stats.chi_square_test``),
which is the pooled two-proportion z-test, ``n`` samples a side, at the per-test level ``alpha``
(the spec's alpha over the run's Bonferroni count). Its power is computed with the normal
approximation under the alternative (pooled standard error under the null, unpooled under the
alternative). An event seen at ``k`` tested states is tested ``k`` times independently: a
change of ``delta`` at every one of them is caught with probability ``1 - (1 - power)**k``.

``min_detectable`` gives the smallest rise and the smallest fall caught with probability
``POWER``, each None when no change in that direction inside [0, 1] is caught.
``tests/randomness/test_distribution_power.py`` checks the stated rise against scipy's chi-square by
simulation: caught in about 90% of trials just above it, far less often at 70% of it.
"""

from __future__ import annotations

import math

from scipy import stats as sps

POWER = 0.9
"""The power at which detectable changes are stated."""


def power_two_proportions(p: float, delta: float, n: int, alpha: float) -> float:
    """Power of the pooled two-sided two-proportion test (= 2 x 2 chi-square), ``n`` a side,
    reference probability ``p``, port ``p + delta``."""
    q = p + delta
    if not (0.0 <= q <= 1.0) or n <= 0:
        return 0.0
    if delta == 0.0:
        return alpha
    pooled = (p + q) / 2.0
    se0 = math.sqrt(max(pooled * (1.0 - pooled), 1e-300) * 2.0 / n)
    se1 = math.sqrt(max(p * (1.0 - p) + q * (1.0 - q), 1e-300) / n)
    z = float(sps.norm.isf(alpha / 2.0))
    shift = abs(delta)
    return float(sps.norm.sf((z * se0 - shift) / se1) + sps.norm.cdf((-z * se0 - shift) / se1))


def min_detectable(
    p: float, n: int, alpha: float, k: int = 1, power: float = POWER
) -> tuple[float | None, float | None]:
    """The smallest increase and the smallest decrease of the event's probability caught with
    probability ``power`` when it changes by that much at each of ``k`` states; None for a
    direction in which no change inside [0, 1] is caught (a rare event cannot get rarer
    detectably from few samples)."""
    need = 1.0 - (1.0 - power) ** (1.0 / max(1, k))  # per-state power that gives ``power``
    out: list[float | None] = []
    for sign in (1.0, -1.0):
        room = (1.0 - p) if sign > 0 else p
        if room <= 0.0 or power_two_proportions(p, sign * room, n, alpha) < need:
            out.append(None)
            continue
        lo, hi = 0.0, room
        for _ in range(40):
            mid = (lo + hi) / 2.0
            if power_two_proportions(p, sign * mid, n, alpha) >= need:
                hi = mid
            else:
                lo = mid
        out.append(hi)
    return out[0], out[1]


def describe(name: str, k: int, states: int, p: float, n: int, alpha: float) -> str:
    """One sentence: what a change of ``name``'s probability the run would have caught."""
    if k == 0:
        return f"{name}: never seen at a tested state (no power to detect a change in it)"
    up, down = min_detectable(p, n, alpha, k)
    where = f"{name}: seen at {k} of {states} tested states (p = {p:.3g}, {n} samples a side)"
    parts = []
    if up is not None:
        parts.append(f"a rise of {up:.3g}")
    if down is not None:
        parts.append(f"a fall of {down:.3g}")
    if not parts:
        return f"{where}; no change of its probability is caught with {POWER:.0%} power"
    text = f"{where}; {' or '.join(parts)} or more at those states is caught with {POWER:.0%} power"
    if down is None:
        text += " (no fall is)"
    return text


def ks_min_detectable(p: float, n: int, alpha: float, power: float = POWER) -> float:
    """A change of a value's frequency at reset (``p`` on the reference, ``n`` seeds a side)
    that the two-sample KS test at level ``alpha`` catches with about ``power``: the test's
    asymptotic critical distance ``sqrt(-ln(alpha / 2) / 2) * sqrt(2 / n)``, plus the
    ``power`` quantile of the frequency difference's spread (KS's distance is at least that
    difference, so this errs on the large side)."""
    critical = math.sqrt(-math.log(alpha / 2.0) / 2.0) * math.sqrt(2.0 / n)
    spread = math.sqrt(2.0 * p * (1.0 - p) / n)
    return critical + float(sps.norm.ppf(power)) * spread
