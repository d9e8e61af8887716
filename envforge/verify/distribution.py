"""Distributional checks for randomness inside ``step`` that no tape hooks (``[rng] step =
"distribution"``).

From one state and action, each side takes ``samples`` steps with fresh draws (the reference
from its own generators seeded anew, the port from ``Draws.from_key`` with fresh keys), and
every output (each element of each state field, the observation, reward and flags) is
compared with a two-sample test: chi-square on the contingency table of values when the output
takes few distinct values (cells, cards, flags), else Kolmogorov-Smirnov. The level of each
test is the spec's ``alpha`` divided by the number of tests (Bonferroni). L1 tests single steps
from ``states`` (state, action) pairs along the reference's own trajectories; L2 tests the
states reached after short action sequences, each side stepping its own copies.

Power: with ``n`` samples a side the chi-square statistic is approximately noncentral with
``lambda = n / 2 * w**2`` for an effect of size ``w`` (Cohen's w, the root of the sum over
outcomes of (p_port - p_ref)**2 / p_ref). ``stats.chi2_power`` states the power at the
Bonferroni level; a slip probability of 1/4 instead of 1/3 on FrozenLake is w = 0.18.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition, take_state
from envforge.stats import chi2_power, chi_square_test, ks_test
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable

MAX_CATEGORIES = 32
"""An output with at most this many distinct values (both sides together) is categorical."""
POWER_EFFECT = 0.1
"""The effect size (Cohen's w) at which the stated power is computed."""


@dataclass
class SampleTest:
    key: str
    """The output tested: a field element (``hand[3]``), ``obs[0]``, ``reward``, a flag."""
    test: str
    p: float
    statistic: float
    ref_summary: dict[str, Any]
    port_summary: dict[str, Any]


def _columns(tr: Transition, fields: list[str]) -> dict[str, np.ndarray]:
    """Every tested output as one ``[n]`` column, named by field and element."""
    out: dict[str, np.ndarray] = {}
    named = {**{f: tr.state[f] for f in fields}, "obs": tr.obs, "reward": tr.reward}
    named.update(terminated=tr.terminated, truncated=tr.truncated)
    for name, values in named.items():
        flat = np.asarray(values).reshape(len(values), -1).astype(np.float64)
        for j in range(flat.shape[1]):
            shape = np.asarray(values).shape[1:]
            index = "".join(f"[{k}]" for k in np.unravel_index(j, shape)) if shape else ""
            out[name + index] = flat[:, j]
    return out


def _summary(x: np.ndarray, categorical: bool) -> dict[str, Any]:
    if categorical:
        values, counts = np.unique(x, return_counts=True)
        return {
            "counts": {str(to_jsonable(v)): int(c) for v, c in zip(values, counts, strict=True)}
        }
    return {
        "mean": float(x.mean()),
        "std": float(x.std()),
        "min": float(x.min()),
        "max": float(x.max()),
    }


def two_sample_tests(ref: Transition, port: Transition, fields: list[str]) -> list[SampleTest]:
    """One test per output that varies on either side (outputs constant and equal are skipped;
    constant and different is p = 0)."""
    tests: list[SampleTest] = []
    port_columns = _columns(port, fields)
    for key, a in _columns(ref, fields).items():
        b = port_columns[key]
        values = np.unique(np.concatenate([a, b]))
        categorical = len(values) <= MAX_CATEGORIES
        if len(values) == 1:
            continue
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            p, statistic, test = 0.0, float("inf"), "constants differ"
        elif categorical:
            table = np.stack([(a[:, None] == values).sum(0), (b[:, None] == values).sum(0)])
            p, statistic = chi_square_test(table)
            test = f"chi-square, {len(values) - 1} df"
        else:
            p, statistic = ks_test(a, b)
            test = "KS"
        tests.append(
            SampleTest(
                key,
                test,
                float(p),
                float(statistic),
                _summary(a, categorical),
                _summary(b, categorical),
            )
        )
    return tests


def sample_steps(
    driver: Driver, state: State, actions: np.ndarray, seeds: np.ndarray
) -> Transition:
    """``driver`` stepped once per row with fresh draws from the row's seed."""
    tr, _ = driver.step_draws(state, actions, seeds, None)
    return tr


def repeat_row(state: State, row: int, n: int) -> State:
    return {k: np.repeat(v[row : row + 1], n, axis=0) for k, v in state.items()}


def fresh_seeds(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**63, size=n, dtype=np.uint64)


Case = tuple[str, list[SampleTest], State | None, list[Any]]
"""Where a set of tests was made, the tests, the state they started from, the actions."""


@dataclass
class DistributionResult:
    finding: Finding | None
    stats: dict[str, Any]


def judge(
    ctx: VerifyContext,
    level: int,
    check: str,
    cases: list[Case],
    samples: int,
) -> DistributionResult:
    """Bonferroni over every test of every case; the smallest p-value below the level fails."""
    total = sum(len(tests) for _, tests, _, _ in cases)
    alpha = ctx.spec.verify.alpha / max(1, total)
    worst: tuple[float, str, SampleTest, State | None, list[Any]] | None = None
    p_min = 1.0
    for where, tests, state, actions in cases:
        for t in tests:
            p_min = min(p_min, t.p)
            if t.p < alpha and (worst is None or t.p < worst[0]):
                worst = (t.p, where, t, state, actions)
    stats_out = {
        "distribution_tests": total,
        "samples_per_side": samples,
        "alpha_per_test": alpha,
        "min_p_value": p_min,
        f"power_at_w{POWER_EFFECT}_df2": round(chi2_power(samples, alpha, 2, POWER_EFFECT), 4),
    }
    if worst is None:
        return DistributionResult(None, stats_out)
    p, where, t, state, actions = worst
    field = t.key.split("[", 1)[0]
    ref_lines, port_lines = ctx.localize([field])
    finding = Finding(
        level=level,
        check=check,
        message=f"{where}: the distribution of {t.key} differs ({t.test}; p={p:.2e} < "
        f"{alpha:.1e}; {samples} samples a side)",
        fields=[field],
        state_before=None if state is None else to_jsonable({k: v[0] for k, v in state.items()}),
        actions=actions,
        expected={t.key: t.ref_summary},
        actual={t.key: t.port_summary},
        error={"p_value": p, "statistic": t.statistic},
        reference_lines=ref_lines,
        port_lines=port_lines,
        extra={"samples_per_side": samples, "test": t.test, "element": t.key},
    )
    return DistributionResult(finding, stats_out)


def check_step_distributions(ctx: VerifyContext, states: State) -> DistributionResult:
    """L1: single steps from each (state, action) pair, ``samples`` a side."""
    spec = ctx.spec
    n = ctx.count(spec.rng.samples, 200)
    rng = ctx.rng(16)
    rows = len(next(iter(states.values())))
    actions = _actions(ctx, rng, rows)
    cases: list[Case] = []
    for k in range(rows):
        state = repeat_row(states, k, n)
        acts = np.repeat(actions[k : k + 1], n, axis=0)
        ref = sample_steps(ctx.ref, state, acts, fresh_seeds(rng, n))
        port = sample_steps(ctx.port, state, acts, fresh_seeds(rng, n))
        where = f"one step from state #{k} with action {to_jsonable(actions[k])}"
        cases.append(
            (
                where,
                two_sample_tests(ref, port, spec.field_names),
                take_state(state, slice(0, 1)),
                [to_jsonable(actions[k])],
            )
        )
    return judge(ctx, 1, "step.distribution", cases, n)


def check_sequence_distributions(
    ctx: VerifyContext, states: State, length: int
) -> DistributionResult:
    """L2: from each state, the same ``length`` random actions on ``samples`` copies a side,
    each copy drawing afresh every step; envs that finish stay as they finished. Compared:
    the final states, and the return and the step each copy finished at (as outputs)."""
    spec = ctx.spec
    n = ctx.count(spec.rng.samples, 200)
    rng = ctx.rng(17)
    rows = len(next(iter(states.values())))
    cases: list[Case] = []
    for k in range(rows):
        program = [_actions(ctx, rng, 1) for _ in range(length)]
        start = repeat_row(states, k, n)
        ends = [_run(driver, start, program, rng, n) for driver in (ctx.ref, ctx.port)]
        where = f"{length} steps from state #{k} under a fixed action sequence"
        actions = [to_jsonable(a[0]) for a in program]
        cases.append(
            (
                where,
                two_sample_tests(ends[0], ends[1], spec.field_names),
                take_state(start, slice(0, 1)),
                actions,
            )
        )
    return judge(ctx, 2, "sequence.distribution", cases, n)


def _run(
    driver: Driver, state: State, program: list[np.ndarray], rng: np.random.Generator, n: int
) -> Transition:
    """Run ``program`` on ``n`` copies; the result holds the final states, each copy's return
    (as ``reward``) and the step it finished at (as ``obs``)."""
    done = np.zeros(n, bool)
    total = np.zeros(n)
    finished = np.full(n, len(program), np.float64)
    flags = np.zeros(n, bool), np.zeros(n, bool)
    for t, action in enumerate(program):
        tr = sample_steps(driver, state, np.repeat(action, n, axis=0), fresh_seeds(rng, n))
        live = ~done
        total[live] += tr.reward[live]
        ended = live & (tr.terminated | tr.truncated)
        finished[ended] = t
        flags = (np.where(live, tr.terminated, flags[0]), np.where(live, tr.truncated, flags[1]))
        state = {k: np.where(_rows(live, v), tr.state[k], v) for k, v in state.items()}
        done |= ended
    return Transition(state, finished, total, flags[0], flags[1])


def _rows(mask: np.ndarray, like: np.ndarray) -> np.ndarray:
    return mask.reshape((-1,) + (1,) * (like.ndim - 1))


def _actions(ctx: VerifyContext, rng: np.random.Generator, n: int) -> np.ndarray:
    from envforge.verify.strategies import sample_actions

    return sample_actions(ctx.spec, rng, n)
