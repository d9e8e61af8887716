"""Where distribution mode tests (``[rng] step = "distribution"``): states from the whole episode
horizon, and states that make the reference run lines of its step nothing else ran.

1. **Pool.** The reference plays whole episodes (up to ``episode_cap`` steps) under several
   policies: uniform and sticky random, the spec's scripted ``[[policy]]``s, and a
   reward-seeking one (discrete actions: at each step every action is tried on the reference
   with the same draws, the best reward taken). States drawn inside the spec's ranges (under its
   ``valid`` rule, as L1's batched sweep draws them) join them. Each state comes with the action
   that was taken there. ``CANDIDATES`` (times ``--scale``) of them are kept, the same share
   from each source and, within one, late steps as likely as early ones.
2. **Coverage steering** (``coverage/lines.py``, the counting L1 uses in tape mode). The
   candidates step once on the reference in chunks of ``CHUNK``, each with its own seed; after
   each chunk the reference's coverage says which lines of its step ran. A line no earlier chunk
   ran is traced to the one candidate that ran it by bisection (the chunk's halves stepped again
   with the same seeds): that candidate is its *witness*. How many chunks ran a line estimates
   how often a state of the pool makes the reference run it; a line below ``RARE_SHARE`` is a
   *rare branch*. The same steps evaluate the spec's ``[[event]]``s (with or without
   coverage): an event that fewer than ``RARE_SHARE`` of the candidates' steps fire is a *rare
   event*, and up to ``RARE_WITNESSES`` candidates that fired it are its witnesses. Events
   reach what line coverage cannot: a branch inside a library the reference calls (UNO's
   reshuffle is in rlcard, not in the adapter file coverage counts). An event with fewer
   witnesses than that among the candidates (none at all: FrozenLake's goal) is sought beyond
   them (``distribution_seek.py``).
3. **Selection.** Every witness is tested (rare-branch and rare-event witnesses with
   ``RARE_FACTOR`` times the samples: the rare-event checks), and ``[rng] states`` (times
   ``--scale``) more states spread over the sources; then ``SCREEN_STATES`` states are
   screened with few samples each. Spread and screened states prefer observations no chosen
   state has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from envforge.backends.base import State, batch_size, concat_states, take_state
from envforge.errors import BadInput
from envforge.verify.context import VerifyContext
from envforge.verify.distribution import event_columns
from envforge.verify.policies import rollout_policies
from envforge.verify.strategies import sample_actions, sample_states

ROLLOUT_ENVS = 32
"""Episodes per policy (at ``--scale 1``)."""
GREEDY_MAX_ACTIONS = 8
"""The reward-seeking policy tries every action: only for discrete spaces this small."""
CANDIDATES = 1024
"""Candidate states stepped under coverage (at ``--scale 1``)."""
CHUNK = 16
RARE_SHARE = 0.02
"""A line that runs from fewer than this share of the candidates is a rare branch."""
RARE_FACTOR = 2
RARE_WITNESSES = 4
"""A rare line is traced to up to this many candidates (from different chunks), each tested:
one state where a branch runs may not show what another one where it runs does."""
MAX_WITNESSES = 32
SCREEN_STATES = 128
SCREEN_DIVISOR = 20
SCREEN_MIN_SAMPLES = 50
"""Besides the deep tests, ``SCREEN_STATES`` (times ``--scale``) states are screened with
``samples / SCREEN_DIVISOR`` samples a side (at least ``SCREEN_MIN_SAMPLES``): a large change at
a state no deep test reaches (a cell that never slips) shows in 100 samples."""

Line = tuple[str, int]


@dataclass
class Pool:
    states: State
    actions: np.ndarray
    source: np.ndarray
    """Index into ``names``: which policy (or ``drawn``) reached the state."""
    t: np.ndarray
    """The episode step the state was reached at (-1: drawn)."""
    names: list[str]

    def take(self, rows: np.ndarray) -> Pool:
        return Pool(
            take_state(self.states, rows), self.actions[rows], self.source[rows], self.t[rows],
            self.names,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.actions)


@dataclass
class Steering:
    available: bool
    chunks: int = 0
    runs: dict[Line, int] = field(default_factory=dict)
    """Line -> chunks that ran it."""
    witness: dict[Line, int] = field(default_factory=dict)
    """Line -> the candidate whose step (with its seed) ran it first."""
    chunk_of: dict[Line, list[int]] = field(default_factory=dict)
    """Line -> the first rows of the chunks that ran it."""
    more: dict[Line, list[int]] = field(default_factory=dict)
    """Rare line -> further candidates that ran it (from later chunks)."""
    stepped: int = 0
    """Candidates stepped (for the events' shares)."""
    events: dict[str, list[int]] = field(default_factory=dict)
    """Spec event -> the candidates whose step fired it."""
    sought: dict[str, list[int]] = field(default_factory=dict)
    """Spec event -> the candidates appended as its witnesses by ``distribution_seek``."""
    seek_steps: int = 0

    def event_share(self, name: str) -> float:
        return len(self.events.get(name, [])) / max(1, self.stepped)

    def fired(self, name: str) -> list[int]:
        return self.events.get(name, []) + self.sought.get(name, [])

    def rare_events(self) -> list[str]:
        return sorted(
            e for e in {**self.events, **self.sought}
            if self.fired(e) and self.event_share(e) < RARE_SHARE
        )  # fmt: skip

    def share(self, line: Line) -> float:
        """The estimated share of candidates whose step runs ``line`` (from chunk counts)."""
        chunk_share = self.runs[line] / max(1, self.chunks)
        return 1.0 - (1.0 - chunk_share) ** (1.0 / CHUNK)

    def rare(self) -> list[Line]:
        return sorted(line for line in self.runs if self.share(line) < RARE_SHARE)


def _greedy(ctx: VerifyContext, rng: np.random.Generator, state: State) -> np.ndarray:
    """Per env, the action with the best reward on the reference (the same draws for each)."""
    n_actions = int(ctx.spec.action.n or 0)
    seeds = rng.integers(0, 2**63, size=batch_size(state), dtype=np.uint64)
    rewards = []
    for a in range(n_actions):
        acts = np.full(batch_size(state), a, dtype=np.int32)
        rewards.append(ctx.ref.step_draws(state, acts, seeds, None)[0].reward)
    table = np.stack(rewards, axis=1) + rng.random((batch_size(state), n_actions)) * 1e-9
    return table.argmax(axis=1).astype(np.int32)


def rollout_pool(ctx: VerifyContext, rng: np.random.Generator) -> Pool:
    """States along whole reference episodes under each policy, and states drawn in the ranges."""
    spec = ctx.spec
    envs = ctx.count(ROLLOUT_ENVS, 8)
    policies: list = list(rollout_policies(spec, rng))
    greedy = spec.action.type == "discrete" and (spec.action.n or 0) <= GREEDY_MAX_ACTIONS
    names = [p.name for p in policies] + (["reward_seeking"] if greedy else []) + ["drawn"]
    parts: list[Pool] = []
    for index in range(len(names) - 1):
        policy = policies[index] if index < len(policies) else None
        seeds = rng.integers(0, 2**32, size=envs, dtype=np.uint64).astype(np.uint32)
        state = ctx.ref.reset(seeds)
        obs = ctx.ref.observe(state)
        if policy is not None:
            policy.reset(envs)
        for t in range(spec.episode_cap):
            n = batch_size(state)
            tvec = np.full(n, t)
            acts = policy.act(obs, tvec) if policy is not None else _greedy(ctx, rng, state)
            parts.append(Pool(state, acts, np.full(n, index), tvec, names))
            tr = ctx.ref.step(state, acts)
            alive = ~(tr.terminated | tr.truncated)
            if not alive.any():
                break
            state, obs = take_state(tr.state, alive), tr.obs[alive]
    try:
        drawn = sample_states(spec, rng, ctx.count(CANDIDATES // 4, 16))
        m = batch_size(drawn)
        acts = sample_actions(spec, rng, m)
        parts.append(Pool(drawn, acts, np.full(m, len(names) - 1), np.full(m, -1), names))
    except BadInput:
        pass  # a valid rule that ranges rarely satisfy: rollouts only
    return Pool(
        concat_states([p.states for p in parts]),
        np.concatenate([p.actions for p in parts]),
        np.concatenate([p.source for p in parts]),
        np.concatenate([p.t for p in parts]),
        names,
    )


def candidates(pool: Pool, rng: np.random.Generator, budget: int) -> Pool:
    """``budget`` states: each source an equal share; within one, every episode step as
    likely as any other (late states are few: episodes end)."""
    sources = np.unique(pool.source)
    share = max(1, budget // max(1, len(sources)))
    rows: list[np.ndarray] = []
    for s in sources:
        mine = np.flatnonzero(pool.source == s)
        _, inverse, counts = np.unique(pool.t[mine], return_inverse=True, return_counts=True)
        weights = 1.0 / counts[inverse]
        k = min(share, len(mine))
        rows.append(rng.choice(mine, size=k, replace=False, p=weights / weights.sum()))
    return pool.take(np.sort(np.concatenate(rows)))


def _executed(ctx: VerifyContext) -> set[Line]:
    return {
        (c.file, line)
        for c in ctx.ref.coverage_read() or []
        for line, count in c.lines.items()
        if count > 0
    }


def _run(ctx: VerifyContext, cand: Pool, seeds: np.ndarray, rows: np.ndarray) -> set[Line]:
    """The lines the reference's step runs from ``rows`` alone (with their seeds)."""
    ctx.ref.coverage_start()
    ctx.ref.step_draws(take_state(cand.states, rows), cand.actions[rows], seeds[rows], None)
    return _executed(ctx)


def _fired(
    ctx: VerifyContext, cand: Pool, seeds: np.ndarray, rows: np.ndarray, out: Steering,
    covered: bool,
) -> set[Line]:  # fmt: skip
    """Step ``rows`` once on the reference: the lines they ran (``covered``), and each spec
    event's firing rows added to ``out.events``."""
    if covered:
        ctx.ref.coverage_start()
    before = take_state(cand.states, rows)
    tr, _ = ctx.ref.step_draws(before, cand.actions[rows], seeds[rows], None)
    out.stepped += len(rows)
    for key, hit in event_columns(ctx, before, cand.actions[rows], tr).items():
        out.events.setdefault(key[len("event ") :], []).extend(int(r) for r in rows[hit > 0])
    return _executed(ctx) if covered else set()


def _bisect(
    ctx: VerifyContext, cand: Pool, seeds: np.ndarray, rows: np.ndarray, targets: set[Line],
    out: dict[Line, int],
) -> None:  # fmt: skip
    """Each line of ``targets`` (run by ``rows`` together) to one row that runs it alone."""
    if len(rows) == 1 or not targets:
        for line in targets:
            out.setdefault(line, int(rows[0]))
        return
    left = set(targets)
    for half in (rows[: len(rows) // 2], rows[len(rows) // 2 :]):
        got = _run(ctx, cand, seeds, half) & left
        _bisect(ctx, cand, seeds, half, got, out)
        left -= got
    for line in left:  # ran only with both halves together: credited to the first row
        out.setdefault(line, int(rows[0]))


def steer(ctx: VerifyContext, cand: Pool, seeds: np.ndarray) -> Steering:
    """The candidates stepped chunk by chunk under coverage; a witness for every line; the
    candidates that fire each spec event (also without coverage)."""
    covered = ctx.ref.coverage_start()
    result = Steering(available=covered)
    for start in range(0, len(cand), CHUNK):
        rows = np.arange(start, min(start + CHUNK, len(cand)))
        ran = _fired(ctx, cand, seeds, rows, result, covered)
        if not covered:
            continue
        result.chunks += 1
        new = {line for line in ran if line not in result.runs}
        for line in ran:
            result.runs[line] = result.runs.get(line, 0) + 1
            result.chunk_of.setdefault(line, []).append(int(rows[0]))
        if new:
            _bisect(ctx, cand, seeds, rows, new, result.witness)
    for line in result.rare():
        for first in result.chunk_of[line][1:RARE_WITNESSES]:
            rows = np.arange(first, min(first + CHUNK, len(cand)))
            found: dict[Line, int] = {}
            _bisect(ctx, cand, seeds, rows, {line}, found)
            result.more.setdefault(line, []).extend(found.values())
    return result


@dataclass
class Selection:
    rows: list[int]
    samples: list[int]
    reasons: list[str]


def select(
    ctx: VerifyContext, cand: Pool, steering: Steering, rng: np.random.Generator, samples: int
) -> Selection:
    """Witnesses first (rare-branch ones with more samples), then rare-event witnesses (more
    samples too), then states spread over sources."""
    rare = set(steering.rare())
    obs = ctx.ref.observe(cand.states).reshape(len(cand), -1)
    by_row: dict[int, list[Line]] = {}
    for line, row in sorted(steering.witness.items(), key=lambda kv: kv[1]):
        by_row.setdefault(row, []).append(line)
    for line, rows in steering.more.items():
        for row in rows:
            by_row.setdefault(row, []).append(line)
    order = sorted(by_row, key=lambda r: (not (set(by_row[r]) & rare), r))
    chosen = Selection([], [], [])
    for row in order[: ctx.count(MAX_WITNESSES, 8)]:
        lines = by_row[row]
        is_rare = bool(set(lines) & rare)
        chosen.rows.append(row)
        chosen.samples.append(samples * RARE_FACTOR if is_rare else samples)
        shown = ", ".join(f"{base_name(f)}:{n}" for f, n in sorted(lines)[:4])
        more = f" and {len(lines) - 4} more" if len(lines) > 4 else ""
        kind = "a rare branch" if is_rare else "lines"
        chosen.reasons.append(f"witness of {kind} of the reference ({shown}{more})")
    _event_witnesses(chosen, steering, samples * RARE_FACTOR)
    seen = {_key(obs[r]) for r in chosen.rows}
    _spread(chosen, cand, rng, obs, seen, ctx.count(ctx.spec.rng.states, 2), samples, "")
    screen = max(SCREEN_MIN_SAMPLES, samples // SCREEN_DIVISOR)
    _spread(chosen, cand, rng, obs, seen, ctx.count(SCREEN_STATES, 16), screen, "screened ")
    return chosen


def _event_witnesses(chosen: Selection, steering: Steering, samples: int) -> None:
    """Up to ``RARE_WITNESSES`` candidates per rare spec event, spread over those that fired
    it, tested with ``samples`` (a line witness among them gets them too)."""
    for event in steering.rare_events():
        fired = steering.fired(event)
        picks = [fired[i] for i in np.linspace(0, len(fired) - 1, RARE_WITNESSES).astype(int)]
        sought = len(steering.sought.get(event, []))
        how = f"; {sought} found by seeking" if sought else ""
        why = f"a rare event of the spec ({event}: {steering.event_share(event):.2%} of candidate steps{how})"
        for row in dict.fromkeys(picks):
            if row in chosen.rows:
                at = chosen.rows.index(row)
                chosen.samples[at] = max(chosen.samples[at], samples)
                chosen.reasons[at] += f"; {why}"
            else:
                chosen.rows.append(row)
                chosen.samples.append(samples)
                chosen.reasons.append(f"witness of {why}")


def _key(row: np.ndarray) -> bytes:
    return np.ascontiguousarray(row).tobytes()


def _spread(
    chosen: Selection, cand: Pool, rng: np.random.Generator, obs: np.ndarray, seen: set[bytes],
    count: int, samples: int, label: str,
) -> None:  # fmt: skip
    """``count`` more rows, the sources in turn, each source's states with an observation not
    yet chosen first."""
    taken = set(chosen.rows)
    by_source: dict[int, list[int]] = {}
    for r in rng.permutation(len(cand)):
        if int(r) not in taken:
            by_source.setdefault(int(cand.source[r]), []).append(int(r))
    queues = list(by_source.values())
    while count > 0 and any(queues):
        for q in queues:
            if q and count > 0:
                fresh = [i for i, r in enumerate(q) if _key(obs[r]) not in seen]
                r = q.pop(fresh[0] if fresh else 0)
                seen.add(_key(obs[r]))
                chosen.rows.append(r)
                chosen.samples.append(samples)
                src, t = cand.names[int(cand.source[r])], int(cand.t[r])
                where = f" at episode step {t}" if t >= 0 else ""
                chosen.reasons.append(f"{label}{src} state{where}")
                count -= 1


def base_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]
