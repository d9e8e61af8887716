"""Distributional checks for randomness inside ``step`` that no tape hooks (``[rng] step =
"distribution"``).

From one state and action, each side takes ``samples`` steps with fresh draws (the reference
from its own generators seeded anew, the port from ``Draws.from_key`` with fresh keys), and
every output (each element of each state field, the observation, reward and flags) is
compared with a two-sample test: chi-square on the contingency table of values when the output
takes few distinct values (cells, cards, flags), else Kolmogorov-Smirnov. The level of each
test is the spec's ``alpha`` divided by the number of tests (Bonferroni). L1 tests single steps
from the (state, action) pairs ``distribution_states.py`` chooses (``check_selected``; each spec
event is a tested 0/1 column too, and ``power.py`` says what the run could detect); L2 tests
the states reached after short action sequences, each side stepping its own copies.

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
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.stats import chi2_power, chi_square_test, ks_test

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


def event_columns(
    ctx: VerifyContext, before: State, actions: np.ndarray, tr: Transition
) -> dict[str, np.ndarray]:
    """Each spec ``[[event]]`` as a 0/1 column (``event natural_win``): tested like an output,
    so that a change in how often it happens has the power ``verify/power.py`` states."""
    out = {}
    for event in ctx.spec.event:
        hit = ctx.spec.expression(event.expr)(**tr.expression_inputs(before, actions))
        out[f"event {event.name}"] = np.broadcast_to(np.asarray(hit), (len(tr.reward),)).astype(
            np.float64
        )
    return out


def two_sample_tests(
    ref: Transition,
    port: Transition,
    fields: list[str],
    extra: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None,
) -> list[SampleTest]:
    """One test per output (and per ``extra`` column, e.g. events) that varies on either side
    (outputs constant and equal are skipped; constant and different is p = 0)."""
    tests: list[SampleTest] = []
    ref_columns, port_columns = _columns(ref, fields), _columns(port, fields)
    if extra is not None:
        ref_columns.update(extra[0])
        port_columns.update(extra[1])
    for key, a in ref_columns.items():
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


Case = tuple[str, list[SampleTest], State | None, list[Any], int]
"""Where a set of tests was made, the tests, the state they started from, the actions, and the
samples a side."""


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
    total = sum(len(case[1]) for case in cases)
    alpha = ctx.spec.verify.alpha / max(1, total)
    worst: tuple[float, str, SampleTest, State | None, list[Any], int] | None = None
    p_min = 1.0
    for where, tests, state, actions, n in cases:
        for t in tests:
            p_min = min(p_min, t.p)
            if t.p < alpha and (worst is None or t.p < worst[0]):
                worst = (t.p, where, t, state, actions, n)
    stats_out = {
        "distribution_tests": total,
        "samples_per_side": samples,
        "alpha_per_test": alpha,
        "min_p_value": p_min,
        f"power_at_w{POWER_EFFECT}_df2": round(chi2_power(samples, alpha, 2, POWER_EFFECT), 4),
    }
    if worst is None:
        return DistributionResult(None, stats_out)
    p, where, t, state, actions, samples = worst
    field = t.key.split("[", 1)[0]
    event = t.key.startswith("event ")
    ref_lines, port_lines = ([], []) if event else ctx.localize([field])
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


CALL_ROWS = 2048
"""Each side is stepped in calls of exactly this many rows (the last one padded): a JAX port
compiles one batch size (the one L2's 2000-sample calls use too)."""


def _sample_all(driver: Driver, state: State, actions: np.ndarray, seeds: np.ndarray) -> Transition:
    n = len(actions)
    parts = []
    for start in range(0, n, CALL_ROWS):
        rows = np.minimum(np.arange(start, start + CALL_ROWS), n - 1)  # pad with the last row
        tr = sample_steps(driver, take_state(state, rows), actions[rows], seeds[rows])
        parts.append(tr.take(slice(0, min(CALL_ROWS, n - start))))
    return Transition(
        {k: np.concatenate([t.state[k] for t in parts]) for k in parts[0].state},
        np.concatenate([t.obs for t in parts]),
        np.concatenate([t.reward for t in parts]),
        np.concatenate([t.terminated for t in parts]),
        np.concatenate([t.truncated for t in parts]),
    )


def check_selected(
    ctx: VerifyContext,
    states: State,
    actions: np.ndarray,
    samples: list[int],
    reasons: list[str],
    base: int,
) -> tuple[DistributionResult, list[Case], dict[str, list[tuple[float, int]]]]:
    """L1: single steps from each chosen (state, action), ``samples[k]`` a side, every output
    and every spec event tested (``verify/distribution_states.py`` chooses them). Also returns,
    per spec event, its probability on the reference and the samples at each tested state.
    ``base``: the samples a side of the deep tests (the stats' ``samples_per_side``)."""
    rng = ctx.rng(16)
    index = np.repeat(np.arange(len(actions)), samples)
    before, acts = take_state(states, index), actions[index]
    ref = _sample_all(ctx.ref, before, acts, fresh_seeds(rng, len(index)))
    port = _sample_all(ctx.port, before, acts, fresh_seeds(rng, len(index)))
    cases: list[Case] = []
    rates: dict[str, list[tuple[float, int]]] = {}
    offset = 0
    for j, n in enumerate(samples):
        rows = slice(offset, offset + n)
        offset += n
        b, a = take_state(before, rows), acts[rows]
        r, q = ref.take(rows), port.take(rows)
        extra = (event_columns(ctx, b, a, r), event_columns(ctx, b, a, q))
        for key, column in extra[0].items():
            rates.setdefault(key[len("event ") :], []).append((float(column.mean()), n))
        where = f"one step from state #{j} ({reasons[j]}) with action {to_jsonable(a[0])}"
        tests = two_sample_tests(r, q, ctx.spec.field_names, extra)
        cases.append((where, tests, take_state(b, slice(0, 1)), [to_jsonable(a[0])], n))
    return judge(ctx, 1, "step.distribution", cases, base), cases, rates


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
                n,
            )
        )
    return judge(ctx, 2, "sequence.distribution", cases, n)


def _run(
    driver: Driver, state: State, program: list[np.ndarray], rng: np.random.Generator, n: int
) -> Transition:
    """Run ``program`` on ``n`` copies; the result holds the final states, each copy's return
    (as ``reward``) and the step it finished at (as ``obs``). A copy that finished is not
    stepped again (a reference may fail when stepped past its episode's end: rlcard does)."""
    done = np.zeros(n, bool)
    total = np.zeros(n)
    finished = np.full(n, len(program), np.float64)
    flags = np.zeros(n, bool), np.zeros(n, bool)
    state = {k: np.array(v) for k, v in state.items()}
    for t, action in enumerate(program):
        live = np.flatnonzero(~done)
        if len(live) == 0:
            break
        before = take_state(state, live)
        acts = np.repeat(action, len(live), axis=0)
        tr = sample_steps(driver, before, acts, fresh_seeds(rng, len(live)))
        total[live] += tr.reward
        ended = live[tr.terminated | tr.truncated]
        finished[ended] = t
        flags[0][live], flags[1][live] = tr.terminated, tr.truncated
        for k in state:
            state[k][live] = tr.state[k]
        done[ended] = True
    return Transition(state, finished, total, flags[0], flags[1])


def _actions(ctx: VerifyContext, rng: np.random.Generator, n: int) -> np.ndarray:
    from envforge.verify.strategies import sample_actions

    return sample_actions(ctx.spec, rng, n)
