"""Support test: does one sample reach beyond the other's observed range more than chance allows?

KS compares whole CDFs and barely notices a range that is 10% too wide (``uniform(-0.055,
0.055)`` for ``uniform(-0.05, 0.05)``: D = 0.045 needs about 4000 samples a side). Extremes
notice at once: under the null hypothesis (same continuous distribution, so the ``n + m``
values are exchangeable) the chance that at least ``k`` of the ``m`` port values lie above every
one of the ``n`` reference values is exactly ``C(m, k) / C(n + m, k)``. Both sides are tested
in both directions (a port range too wide or too narrow); ``slack`` (the spec tolerance) keeps
float32 rounding of a float64 bound from counting.
"""

from __future__ import annotations

from math import exp, lgamma

import numpy as np


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
