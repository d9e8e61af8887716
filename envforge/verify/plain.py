"""Plain words for a difference whose numbers alone mislead: an expected value the port's dtype
cannot hold, a few ulps, a count off by one, a flipped sign.

"expected 0.8846875, got 0.8846874833" reads like a wrong formula; said as "0.8846875 is not
representable in float32: the nearest float32 is 0.88468748331069946, which the port has", it
is a dtype choice. Each sentence is said only when the values show it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envforge.verify.compare import ulp_distance

FEW_ULPS = 16
"""Up to this many ulps apart is said as "k ulps" (rounding, an operation order)."""


def _scalar(value: Any) -> np.generic | None:
    array = np.asarray(value)
    return array.reshape(-1)[0] if array.size == 1 and array.dtype.kind in "biuf" else None


def explain(key: str, expected: Any, actual: Any) -> list[str]:
    """Sentences on one key's expected (reference) and actual (port) values, each with its dtype."""
    want, got = _scalar(expected), _scalar(actual)
    if want is None or got is None or want.dtype.kind == "b" or got.dtype.kind == "b":
        return []
    out = []
    if got.dtype.kind == "f" and want.dtype.itemsize > got.dtype.itemsize:
        nearest = want.astype(got.dtype)
        if np.isfinite(want) and float(nearest) != float(want):
            holds = "which the port has" if nearest == got else f"the port has {got!r}"
            out.append(
                f"{key}: the expected {float(want)!r} is not representable in {got.dtype} (the "
                f"port's dtype): the nearest {got.dtype} is {float(nearest)!r}, {holds}"
            )
            want = nearest
    elif want.dtype == got.dtype == np.float64 and np.isfinite(want):
        as32 = np.float32(want)
        if float(as32) != float(want) and float(as32) == float(got):  # a float32 port, widened
            out.append(
                f"{key}: the expected {float(want)!r} is not representable in float32, and the "
                f"port has its nearest float32 ({float(got)!r}): the port computes it in float32"
            )
            return out
    if want.dtype.kind == "f" and got.dtype.kind == "f" and want.dtype == got.dtype:
        ulps = int(ulp_distance(np.asarray(want), np.asarray(got)))
        if 0 < ulps <= FEW_ULPS:
            out.append(f"{key}: {ulps} ulp{'s' * (ulps > 1)} apart in {got.dtype} (rounding)")
    if want.dtype.kind in "iu" and got.dtype.kind in "iu" and abs(int(want) - int(got)) == 1:
        word = "one more" if int(got) > int(want) else "one less"
        out.append(f"{key}: off by one (the port has {word}: {int(got)} for {int(want)})")
    if float(want) != 0.0 and float(got) == -float(want):
        out.append(f"{key}: the sign is flipped ({float(got)!r} for {float(want)!r})")
    return out


def explain_all(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """:func:`explain` for every key, and for an array key its first differing element."""
    out = []
    for key, want in expected.items():
        got = actual.get(key)
        a, b = np.asarray(want), np.asarray(got)
        if a.size > 1 and a.shape == b.shape:
            differs = np.flatnonzero(a.reshape(-1) != b.reshape(-1))
            if len(differs):
                j = int(differs[0])
                out += explain(f"{key}[{j}]", a.reshape(-1)[j], b.reshape(-1)[j])
        else:
            out += explain(key, want, got)
    return out
