"""The differential's step comparison when the port draws from its own key (``[rng] step =
"distribution"``): a per-seed difference is no evidence there.

The original and the mutant step the same states from the same keys; a mutant that re-keys a
draw (Blackjack's ``randint(fold_in(hit_key, 1), ...)``: another card, the same distribution)
differs on most rows and is still the same environment. So each differing row is only a
*suspect*, and the mutant differs when either

* **paired shift** over every compared step: per output column with at most
  ``PAIRED_MAX_VALUES`` values, per value, the rows where only the original gives it against
  those where only the mutant does (each row stepped from its own fresh key, the same on both
  sides: independent rows). They balance whenever each row's two distributions agree
  (re-keyed or not), so a one-way excess is a changed distribution (a fickle probability of 0.33
  instead of 0.3 moves 3% of rows one way); a binomial test per value; or
* **resampled suspects**: up to ``CONFIRM_STATES`` suspect (state, action) pairs stepped
  ``CONFIRM_SAMPLES`` times a side with fresh draws (the same seeds on both sides), every output
  compared by the verifier's two-sample tests (a dealer who hits on 17 differs at a state where
  the dealer holds 17 whatever the draws).

Both at the spec's ``alpha``, Bonferroni over every test. Otherwise the suspects are dropped
(``DifferentialResult.unconfirmed``) and the mutant is no different in its steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from envforge.backends.base import Driver, State, Transition, take_state
from envforge.verify.distribution import two_sample_tests

PAIRED_MAX_VALUES = 32
CONFIRM_STATES = 16
CONFIRM_SAMPLES = 1000
KEEP_ROWS = 256


def _columns(tr: Transition, fields: list[str]) -> dict[str, np.ndarray]:
    named = {**{f: tr.state[f] for f in fields}, "obs": tr.obs, "reward": tr.reward}
    named.update(terminated=tr.terminated, truncated=tr.truncated)
    out = {}
    for name, values in named.items():
        flat = np.asarray(values).reshape(len(values), -1).astype(np.float64)
        for j in range(flat.shape[1]):
            out[f"{name}[{j}]" if flat.shape[1] > 1 else name] = flat[:, j]
    return out


def count_alone(counts: dict[str, int], keys: list[str], fields: list[str]) -> None:
    """Count ``keys`` into ``counts`` when none is a state field: a row in which only outputs
    (obs, reward, a flag) differed, the state reached being the same."""
    if not set(keys) & set(fields):
        for k in keys:
            counts[k] = counts.get(k, 0) + 1


class StepSuspects:
    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        self.counts: dict[str, dict[float, list[int]]] = {}
        """Column -> value -> [rows only the original gave it, rows only the mutant did]."""
        self.wide: set[str] = set()
        self.rows: list[dict[str, Any]] = []
        """The first ``KEEP_ROWS`` suspects (where, keys, state, action, values)."""
        self.n = 0
        self.key_counts: dict[str, int] = {}
        self.alone_counts: dict[str, int] = {}
        """Keys of suspect rows in which no state field differed (outputs only)."""

    def observe(self, a: Transition, b: Transition) -> None:
        """Count each column's one-way rows of a batch stepped from the same keys."""
        cols_b = _columns(b, self.fields)
        for key, x in _columns(a, self.fields).items():
            y = cols_b[key]
            if key in self.wide or np.array_equal(x, y):
                continue
            table = self.counts.setdefault(key, {})
            for v in np.unique(np.concatenate([x, y])):
                pair = table.setdefault(float(v), [0, 0])
                pair[0] += int(np.sum((x == v) & (y != v)))
                pair[1] += int(np.sum((x != v) & (y == v)))
            if len(table) > PAIRED_MAX_VALUES:
                self.wide.add(key)

    def suspect(self, where: str, keys: list[str], **info: Any) -> None:
        self.n += 1
        for k in keys:
            self.key_counts[k] = self.key_counts.get(k, 0) + 1
        count_alone(self.alone_counts, keys, self.fields)
        if len(self.rows) < KEEP_ROWS:
            self.rows.append({"where": where, "keys": keys, **info})

    def _paired(self) -> tuple[float, str, int]:
        tests = [(k, v, a, b) for k, t in self.counts.items() if k not in self.wide
                 for v, (a, b) in t.items() if a + b]  # fmt: skip
        if not tests:
            return 1.0, "", 0
        p, key = min((float(stats.binomtest(a, a + b).pvalue), k) for k, _, a, b in tests)
        return p, key, len(tests)

    def _resampled(
        self, original: Driver, mutant: Driver, rng: np.random.Generator
    ) -> list[tuple[float, str]]:
        found: list[tuple[float, str]] = []
        seen: set[bytes] = set()
        for row in self.rows:
            if len(found) >= CONFIRM_STATES:
                break
            state: State = {k: np.asarray(v)[None] for k, v in row["state"].items()}
            action = np.asarray(row["action"])[None]
            tag = b"".join(np.ascontiguousarray(v).tobytes() for v in (*state.values(), action))
            if tag in seen:
                continue
            seen.add(tag)
            many = take_state(state, np.zeros(CONFIRM_SAMPLES, dtype=int))
            acts = np.repeat(action, CONFIRM_SAMPLES, axis=0)
            seeds = rng.integers(0, 2**63, size=CONFIRM_SAMPLES, dtype=np.uint64)
            a, _ = original.step_draws(many, acts, seeds, None)
            b, _ = mutant.step_draws(many, acts, seeds, None)
            found += [
                (t.p, f"{t.key} at a suspect state") for t in two_sample_tests(a, b, self.fields)
            ]
        return found

    def settle(self, original: Driver, mutant: Driver, alpha: float) -> str | None:
        """How the mutant's steps differ in distribution (``None``: they do not, or no row
        differed at all)."""
        if not self.rows:
            return None
        p_pair, key, n_pair = self._paired()
        resampled = self._resampled(original, mutant, np.random.default_rng([0, 8]))
        level = alpha / max(1, n_pair + len(resampled))
        p_res, why = min(resampled, default=(1.0, ""))
        if min(p_pair, p_res) >= level:
            return None
        return f"paired shift of {key}" if p_pair <= p_res else why


def paired_shift_pvalue(x: np.ndarray, y: np.ndarray) -> float:
    """Both sides reset from the same seeds (row by row): per value v, the seeds where only
    the original gives v against those where only the mutant does. Whenever the two
    distributions agree (the mutant's draws the same, re-keyed or independent) the two counts
    are equal in expectation, so a one-way excess is a changed distribution: a binomial test
    per value, Bonferroni over the values (at most ``PAIRED_MAX_VALUES``, else 1). Far more
    powerful than KS on the two samples: taxi's fickle passenger at 0.33 instead of 0.3 moves
    3% of seeds one way, which KS over 4096 seeds does not see."""
    values = np.unique(np.concatenate([x, y]))
    if len(values) > PAIRED_MAX_VALUES:
        return 1.0
    p = 1.0
    for v in values:
        only_x = int(np.sum((x == v) & (y != v)))
        only_y = int(np.sum((x != v) & (y == v)))
        if only_x + only_y:
            p = min(p, float(stats.binomtest(only_x, only_x + only_y).pvalue))
    return min(1.0, p * len(values))


def value_at(tr: Transition, key: str, i: int) -> Any:
    """Row ``i`` of a transition's ``key`` (a state field, or obs, reward, a flag)."""
    return tr.state[key][i] if key in tr.state else getattr(tr, key)[i]


def reset_done(driver: Driver, state: State, done: np.ndarray, rng: np.random.Generator) -> State:
    """``state`` with the rows where ``done`` reset afresh (a full batch of resets, so that a
    JAX reset compiles once)."""
    if not done.any():
        return state
    fresh = driver.reset(rng.integers(0, 2**32, len(done)).astype(np.uint32))
    return {
        k: np.where(done.reshape(-1, *([1] * (v.ndim - 1))), fresh[k], v) for k, v in state.items()
    }
