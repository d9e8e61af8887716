"""L1's reset checks: the port's reset states against the reference's, exactly (replicate mode)
or as distributions per field (two-sample KS and support tests, Bonferroni over fields)."""

from __future__ import annotations

from typing import Any

import numpy as np

from envforge.backends.base import State
from envforge.verify import reset_valid
from envforge.verify.context import VerifyContext, reset_mismatch
from envforge.verify.findings import Finding
from envforge.verify.power import POWER, ks_min_detectable
from envforge.verify.stats import ks_test, support_pvalue


def check_reset(ctx: VerifyContext) -> tuple[Finding | None, dict[str, Any]]:
    """Resets are cheap next to steps, and a reset probability moved by a few percent needs
    thousands of seeds a side: ``--scale`` below 1 does not shrink the sample (above 1 it
    grows it)."""
    spec = ctx.spec
    n = max(spec.verify.reset_samples, ctx.count(spec.verify.reset_samples, 200))
    seeds = (np.arange(n, dtype=np.uint64) * 7919 + ctx.options.seed * 104729).astype(np.uint32)
    ref = ctx.ref.reset(seeds)
    port = ctx.port.reset(seeds)
    if spec.rng.mode == "replicate":
        finding = reset_mismatch(ctx, 1, seeds, ref, port)
        return finding, {"reset_seeds": n, "reset_test": "exact"}
    alpha = spec.verify.alpha / max(1, len(spec.state)) / 2.0  # per field, KS beside support
    detectable = {f"p={p}": ks_min_detectable(p, n, alpha) for p in (0.5, 0.3, 0.1)}
    finding = distribution_finding(
        ctx, ref, port, "reset.distribution", "reset distribution of {f} differs"
    ) or reset_valid.check(ctx, seeds, ref, port)
    return finding, {"reset_seeds": n, "reset_test": "ks_2samp", "reset_detectable": detectable}


def reset_power(stats: dict[str, Any]) -> str:
    """What the reset distribution test could catch, as the level's summary says it."""
    detectable = stats.get("reset_detectable")
    if not detectable:
        return ""
    return (
        f"; at reset ({stats['reset_seeds']} seeds a side) a value of frequency 0.3 moving by "
        f"{detectable['p=0.3']:.3g} is caught with {POWER:.0%} power"
    )


def distribution_finding(
    ctx: VerifyContext, ref: State, port: State, check: str, message: str
) -> Finding | None:
    """Per-field two-sample tests (Bonferroni over fields); the smallest p-value below alpha wins."""
    spec = ctx.spec
    alpha = spec.verify.alpha / max(1, len(spec.state))
    worst: tuple[float, str, float, str, int] | None = None
    for f in spec.state:
        atol_f = np.broadcast_to(spec.tolerance(f.name)[0], f.shape).reshape(-1)
        a = ref[f.name].reshape(len(ref[f.name]), -1).astype(np.float64)
        b = port[f.name].reshape(len(port[f.name]), -1).astype(np.float64)
        for j in range(a.shape[1]):
            if (
                np.array_equal(np.unique(a[:, j]), np.unique(b[:, j]))
                and len(np.unique(a[:, j])) == 1
            ):
                continue
            if f.np_dtype.kind == "f" and spec.compare.mode == "tolerance":
                scale = max(np.ptp(a[:, j]), np.ptp(b[:, j]))
                if scale <= atol_f[j]:  # both are a constant within tolerance
                    continue
            p_ks, d = ks_test(a[:, j], b[:, j])
            slack = float(atol_f[j]) if f.np_dtype.kind == "f" else 0.0
            p_support, seen = support_pvalue(a[:, j], b[:, j], slack)
            # two tests per component: each at half the level (Bonferroni)
            p, test = min((2 * p_ks, "KS"), (2 * p_support, seen))
            if p < alpha and (worst is None or p < worst[0]):
                worst = (p, f.name, d, test, j)
    if worst is None:
        return None
    p, name, d, test, j = worst
    ref_lines, port_lines = ctx.localize([name], "reset")
    a, b = ref[name].astype(np.float64), port[name].astype(np.float64)
    f = spec.field(name)
    if f.shape:  # the element tested, not the whole array's spread
        a, b = a.reshape(len(a), -1)[:, j], b.reshape(len(b), -1)[:, j]
        name_shown = f.element_name(j)
    else:
        name_shown = name

    def summary(x: np.ndarray) -> dict[str, float]:
        return {
            "mean": float(x.mean()),
            "std": float(x.std()),
            "min": float(x.min()),
            "max": float(x.max()),
        }

    return Finding(
        level=1,
        check=check,
        message=message.format(f=name_shown) + f" ({test}; KS D={d:.3f}; p={p:.2e})",
        fields=[name],
        expected={name: summary(a)},
        actual={name: summary(b)},
        error={name: d, "p_value": p},
        reference_lines=ref_lines,
        port_lines=port_lines,
    )
