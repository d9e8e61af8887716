"""The statistics behind envforge's verdicts on samples, in one place.

Two samples differ (reset states, free-running episodes, draws inside ``step``; L1-L3): the
two-sample Kolmogorov-Smirnov test, chi-square on a contingency table of few distinct values
and its power, and a support test for a range that is too wide or too narrow. Two means are the
same within a margin (L4 returns): two one-sided tests (TOST), stratified by training seed.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from math import exp, lgamma
from typing import Any

import numpy as np
from scipy import stats as sps

# ---- two samples differ ----------------------------------------------------------------------


def quietly(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, bool]:
    """scipy's result and whether scipy warned while computing it (a RuntimeWarning: precision
    lost on nearly identical data, an exact method given up for an asymptotic one). The warning
    is captured here, at its source: printed, it landed above verify's report and read like a
    fault of the port. Callers whose result it makes unreliable decide without it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call(*args, **kwargs)
    return result, any(issubclass(w.category, RuntimeWarning) for w in caught)


def ks_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov: (p-value, D)."""
    result, _ = quietly(sps.ks_2samp, a, b)
    return float(result.pvalue), float(result.statistic)


def chi_square_test(table: np.ndarray) -> tuple[float, float]:
    """Chi-square on a ``2 x k`` table of counts (a row a side), no continuity correction:
    (p-value, statistic)."""
    (statistic, p, _, _), _ = quietly(sps.chi2_contingency, table, correction=False)
    return float(p), float(statistic)


def chi2_power(n: int, alpha: float, df: int, w: float) -> float:
    """Power of the two-sample chi-square test with ``n`` samples a side to detect effect ``w``
    (Cohen's w): the statistic is about noncentral with ``lambda = n / 2 * w**2``."""
    df = max(1, df)
    critical = sps.chi2.ppf(1.0 - alpha, df)
    return float(sps.ncx2.sf(critical, df, n / 2.0 * w * w))


# Support test: does one sample reach beyond the other's observed range more than chance allows?
#
# KS compares whole CDFs and barely notices a range that is 10% too wide (``uniform(-0.055,
# 0.055)`` for ``uniform(-0.05, 0.05)``: D = 0.045 needs about 4000 samples a side). Extremes
# notice at once: under the null hypothesis (same continuous distribution, so the ``n + m``
# values are exchangeable) the chance that at least ``k`` of the ``m`` port values lie above every
# one of the ``n`` reference values is exactly ``C(m, k) / C(n + m, k)``. Both sides are tested
# in both directions (a port range too wide or too narrow); ``slack`` (the spec tolerance) keeps
# float32 rounding of a float64 bound from counting.


def _beyond_all(k: int, n: int, m: int) -> float:
    """P(at least k of m exchangeable draws rank above all n others) = C(m,k) / C(n+m,k)."""
    if k <= 0:
        return 1.0
    if k > m:
        return 0.0
    return exp(lgamma(m + 1) - lgamma(m - k + 1) - lgamma(n + m + 1) + lgamma(n + m - k + 1))


def support_pvalue(ref: np.ndarray, port: np.ndarray, slack: float = 0.0) -> tuple[float, str]:
    """(Bonferroni-corrected p-value over the four one-sided tests, what was seen)."""
    ref = np.asarray(ref, np.float64)
    port = np.asarray(port, np.float64)
    n, m = len(ref), len(port)
    if n == 0 or m == 0:
        return 1.0, ""
    counts = {
        "port values above the reference's max": (int(np.sum(port > ref.max() + slack)), n, m),
        "port values below the reference's min": (int(np.sum(port < ref.min() - slack)), n, m),
        "reference values above the port's max": (int(np.sum(ref > port.max() + slack)), m, n),
        "reference values below the port's min": (int(np.sum(ref < port.min() - slack)), m, n),
    }
    p, label = min((_beyond_all(k, a, b), f"{k} {what}") for what, (k, a, b) in counts.items())
    return min(1.0, 4 * p), label


# ---- two means are the same: TOST ------------------------------------------------------------
#
# Equivalence of mean episode return: two one-sided tests (TOST), stratified by training seed.
#
# Both sides are evaluated with the same K trained policies and N episodes per policy, so the
# policy-to-policy spread cancels in the difference. Each side's mean is the mean of its K
# per-policy means; the standard error of the difference uses only within-policy variances and
# Welch-Satterthwaite degrees of freedom over the 2K groups. Equivalence at level alpha holds
# when the (1 - 2 alpha) confidence interval of the difference lies inside (-margin, +margin),
# i.e. both one-sided p-values are below alpha.


@dataclass(frozen=True)
class MeanEstimate:
    """A stratified mean with its standard error and a two-sided (1 - alpha) interval."""

    mean: float
    se: float
    df: float
    ci_low: float
    ci_high: float
    n: int


@dataclass(frozen=True)
class EquivalenceTest:
    """TOST on ``port - reference`` mean return."""

    port: MeanEstimate
    reference: MeanEstimate
    difference: float
    """Port mean minus reference mean (the sim-to-sim gap)."""
    se: float
    df: float
    ci_low: float
    """Lower end of the (1 - 2 alpha) interval of the difference (the TOST interval)."""
    ci_high: float
    p_lower: float
    """p-value of H0: difference <= -margin."""
    p_upper: float
    """p-value of H0: difference >= +margin."""
    p_difference: float
    """Two-sided p-value of H0: difference == 0 (is there any detectable gap?)."""
    margin: float
    alpha: float
    paired: bool = False

    @property
    def p_value(self) -> float:
        """The TOST p-value: the larger of the two one-sided p-values."""
        return max(self.p_lower, self.p_upper)

    @property
    def equivalent(self) -> bool:
        return self.p_value < self.alpha

    @property
    def different(self) -> bool:
        """Not shown equivalent, and the gap is significant (two-sided test of no difference).

        Not equivalent and not significant means the test lacked power: inconclusive."""
        return not self.equivalent and self.p_difference < self.alpha

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(p_value=self.p_value, equivalent=self.equivalent)
        return out


def _t_sf(t: float, df: float) -> float:
    """Survival function of Student's t (normal when df is infinite)."""
    if math.isinf(df):
        return float(sps.norm.sf(t))
    return float(sps.t.sf(t, df))


def _t_ppf(q: float, df: float) -> float:
    if math.isinf(df):
        return float(sps.norm.ppf(q))
    return float(sps.t.ppf(q, df))


def _group_terms(groups: list[np.ndarray]) -> tuple[float, list[float], list[int]]:
    """(mean of group means, per-group variance-of-the-grand-mean terms, group sizes)."""
    k = len(groups)
    means = [float(np.mean(g)) for g in groups]
    terms = [float(np.var(g, ddof=1)) / (len(g) * k * k) if len(g) > 1 else 0.0 for g in groups]
    return float(np.mean(means)), terms, [len(g) for g in groups]


def _welch_df(terms: list[float], sizes: list[int]) -> float:
    num = sum(terms) ** 2
    den = sum(t * t / (n - 1) for t, n in zip(terms, sizes, strict=True) if n > 1)
    return num / den if den > 0 else math.inf


def stratified_mean(groups: list[np.ndarray], alpha: float = 0.05) -> MeanEstimate:
    """Mean of per-group means with a two-sided (1 - alpha) t interval."""
    mean, terms, sizes = _group_terms(groups)
    se = math.sqrt(sum(terms))
    df = _welch_df(terms, sizes)
    half = _t_ppf(1 - alpha / 2, df) * se if se > 0 else 0.0
    return MeanEstimate(mean, se, df, mean - half, mean + half, sum(sizes))


def tost(
    port_groups: list[np.ndarray],
    reference_groups: list[np.ndarray],
    margin: float,
    alpha: float = 0.05,
    paired: bool = False,
) -> EquivalenceTest:
    """Test |mean(port) - mean(reference)| < margin; groups are per training seed, same order.

    ``paired``: episode i of a group started from the same state on both sides (replicate RNG
    mode), so the test runs on per-episode differences, which removes the start-state spread.
    """
    if len(port_groups) != len(reference_groups) or not port_groups:
        raise ValueError("both sides need the same, non-zero number of policy groups")
    if paired:
        diff, terms, sizes = _group_terms(
            [p - r for p, r in zip(port_groups, reference_groups, strict=True)]
        )
    else:
        port_mean, port_terms, port_sizes = _group_terms(port_groups)
        ref_mean, ref_terms, ref_sizes = _group_terms(reference_groups)
        diff, terms, sizes = port_mean - ref_mean, port_terms + ref_terms, port_sizes + ref_sizes
    se = math.sqrt(sum(terms))
    df = _welch_df(terms, sizes)
    if se > 0:
        p_lower = _t_sf((diff + margin) / se, df)
        p_upper = _t_sf((margin - diff) / se, df)
        p_diff = 2 * _t_sf(abs(diff) / se, df)
        half = _t_ppf(1 - alpha, df) * se
    else:  # no spread at all (e.g. deterministic episodes that all agree): decide exactly
        p_lower = 0.0 if diff > -margin else 1.0
        p_upper = 0.0 if diff < margin else 1.0
        p_diff = 1.0 if diff == 0 else 0.0
        half = 0.0
    return EquivalenceTest(
        port=stratified_mean(port_groups, alpha),
        reference=stratified_mean(reference_groups, alpha),
        difference=diff,
        se=se,
        df=df,
        ci_low=diff - half,
        ci_high=diff + half,
        p_lower=p_lower,
        p_upper=p_upper,
        p_difference=min(1.0, p_diff),
        margin=margin,
        alpha=alpha,
        paired=paired,
    )


@dataclass(frozen=True)
class SampleComparison:
    """A per-episode quantity on each side (an event count, a mean reward) and a Welch test."""

    name: str
    port_mean: float
    reference_mean: float
    port_fraction: float
    """Fraction of port episodes where the quantity is non-zero (an event happened at all)."""
    reference_fraction: float
    p_value: float
    port_n: int
    reference_n: int

    @property
    def difference(self) -> float:
        return self.port_mean - self.reference_mean


def compare_samples(
    name: str, port: np.ndarray, reference: np.ndarray, paired: bool = False
) -> SampleComparison:
    """Welch's t-test of two samples, or a paired t-test (an exact decision without spread)."""
    port = np.asarray(port, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if paired and len(port) == len(reference) and len(port) > 1:
        d = port - reference
        p, unreliable = math.nan, True
        if np.var(d) > 0:
            result, unreliable = quietly(sps.ttest_1samp, d, 0.0)
            p = float(result.pvalue)
        if unreliable:  # no spread, or none above rounding: the means decide
            p = 1.0 if math.isclose(d.mean(), 0.0, abs_tol=1e-12) else 0.0
        port_mean, ref_mean = float(port.mean()), float(reference.mean())
    elif len(port) == 0 or len(reference) == 0:
        p, port_mean, ref_mean = 1.0, float("nan"), float("nan")
    else:
        port_mean, ref_mean = float(port.mean()), float(reference.mean())
        var = (np.var(port, ddof=1) / len(port) if len(port) > 1 else 0.0) + (
            np.var(reference, ddof=1) / len(reference) if len(reference) > 1 else 0.0
        )
        p, unreliable = math.nan, True
        if var > 0 and len(port) > 1 and len(reference) > 1:
            result, unreliable = quietly(sps.ttest_ind, port, reference, equal_var=False)
            p = float(result.pvalue)
        if unreliable:  # no spread, or none above rounding: the means decide
            p = 1.0 if math.isclose(port_mean, ref_mean, rel_tol=1e-9, abs_tol=1e-12) else 0.0
    return SampleComparison(
        name=name,
        port_mean=port_mean,
        reference_mean=ref_mean,
        port_fraction=float((port != 0).mean()) if len(port) else 0.0,
        reference_fraction=float((reference != 0).mean()) if len(reference) else 0.0,
        p_value=p,
        port_n=len(port),
        reference_n=len(reference),
    )


def better_than(
    trained: list[np.ndarray], baseline: np.ndarray, threshold: float, alpha: float = 0.05
) -> tuple[bool, float, float]:
    """Is the trained mean above the baseline mean by ``threshold``, significantly?

    Returns (verdict, gain = trained mean - baseline mean, one-sided p-value of gain <= threshold).
    """
    mean, terms, sizes = _group_terms(trained)
    base = np.asarray(baseline, dtype=np.float64)
    base_term = float(np.var(base, ddof=1)) / len(base) if len(base) > 1 else 0.0
    se = math.sqrt(sum(terms) + base_term)
    gain = mean - float(base.mean())
    if se > 0:
        df = _welch_df([*terms, base_term], [*sizes, len(base)])
        p = _t_sf((gain - threshold) / se, df)
    else:
        p = 0.0 if gain > threshold else 1.0
    return p < alpha, gain, p
