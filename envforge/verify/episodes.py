"""Episodes on both sides with the same actions, several policies' episodes in one batch: what
L3 rolls out and L4 evaluates trained policies with. Per field the largest error seen is kept
and per named event how often it happened on each side (``Tally``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, take_state
from envforge.spec import EnvSpec
from envforge.verify.context import VerifyContext, reset_mismatch
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.policies import Policy
from envforge.verify.tape import pair_finding, step_pair


@dataclass
class Tally:
    steps: int = 0
    draws: int = 0
    seconds: float = 0.0
    max_error: dict[str, float] = field(default_factory=dict)
    max_ulp: dict[str, float] = field(default_factory=dict)
    element_error: dict[str, np.ndarray] = field(default_factory=dict)
    """Array fields: the largest absolute error of each element (the per-element table)."""
    events: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    excused: dict[str, int] = field(default_factory=dict)
    """Per policy: terminated flags that flipped on a float threshold (see compare.py)."""

    def errors(self, diff: Any) -> None:
        for key, err in diff.abs_err.items():
            if len(err):
                self.max_error[key] = max(self.max_error.get(key, 0.0), float(np.max(err)))
        for key, ulp in diff.ulp.items():
            if len(ulp):
                self.max_ulp[key] = max(self.max_ulp.get(key, 0.0), float(np.max(ulp)))
        for key, err in diff.element_err.items():
            seen = self.element_error.get(key)
            self.element_error[key] = err if seen is None else np.maximum(seen, err)

    def element_table(self, spec: EnvSpec) -> dict[str, float]:
        """``{"qvel[3] (bthigh)": 2.1e-05, ...}``: every array field's elements by name."""
        return {
            spec.field(key).element_name(j): float(v)
            for key, err in self.element_error.items()
            for j, v in enumerate(np.asarray(err).reshape(-1))
        }


@dataclass(frozen=True)
class Group:
    """One policy's episodes inside a batch of several policies' episodes: rows ``[lo, hi)``."""

    policy: Policy
    lo: int
    hi: int


def batch_groups(policies: list[Policy], seeds: list[np.ndarray]) -> tuple[list[Group], np.ndarray]:
    """Lay several policies' episodes out as one batch (each policy's seeds one after another):
    every step of all of them is then one call per side instead of one per policy (L3's cost
    is per-call, not per-row)."""
    groups, lo = [], 0
    for policy, s in zip(policies, seeds, strict=True):
        groups.append(Group(policy, lo, lo + len(s)))
        lo += len(s)
    return groups, np.concatenate(seeds) if seeds else np.zeros(0, np.uint32)


def _masks(groups: list[Group], active: np.ndarray) -> list[np.ndarray]:
    """Per group, which of the ``active`` rows are its own."""
    return [(active >= g.lo) & (active < g.hi) for g in groups]


def _act(
    spec: EnvSpec,
    groups: list[Group],
    masks: list[np.ndarray],
    obs: np.ndarray,
    t: int,
    state: State,
) -> np.ndarray:
    """Each policy's actions for its own active rows (``active`` is sorted, groups are
    contiguous: the parts concatenate in row order); a policy that ``reads_state`` (whose turn
    it is, the action masks) gets its rows' states too."""
    parts = [
        g.policy.act(obs[m], np.full(int(m.sum()), t), state=take_state(state, m))  # type: ignore[call-arg]
        if getattr(g.policy, "reads_state", False)
        else g.policy.act(obs[m], np.full(int(m.sum()), t))
        for g, m in zip(groups, masks, strict=True)
        if m.any()
    ]
    if not parts:
        return np.zeros((0, *spec.action.shape), dtype=spec.action.dtype)
    return np.concatenate(parts)


def _count_events(
    ctx: VerifyContext,
    tally: Tally,
    groups: list[Group],
    masks: list[np.ndarray],
    side: int,
    before: State,
    tr: Any,
    actions: np.ndarray,
) -> None:
    for event in ctx.spec.event:
        hit = ctx.spec.expression(event.expr)(**tr.expression_inputs(before, actions))
        hit = np.broadcast_to(hit, tr.reward.shape)
        for g, m in zip(groups, masks, strict=True):
            counts = tally.events.setdefault(g.policy.name, {}).setdefault(event.name, [0, 0])
            counts[side] += int(np.count_nonzero(hit[m]))


def _start(ctx: VerifyContext, seeds: np.ndarray) -> tuple[State, State, Finding | None]:
    ref = ctx.ref.reset(seeds)
    if ctx.spec.rng.mode == "sync":
        return ref, ref, None
    port = ctx.port.reset(seeds)
    return ref, port, reset_mismatch(ctx, 3, seeds, ref, port, prefix="episode ")


def compared_episodes(
    ctx: VerifyContext, policy: Policy, seeds: np.ndarray, tally: Tally
) -> tuple[Finding | None, np.ndarray, np.ndarray]:
    """Run episodes on both sides with the same actions; return (finding, ref returns, ref lengths)."""
    return compared_groups(ctx, [Group(policy, 0, len(seeds))], seeds, tally)


def compared_groups(
    ctx: VerifyContext, groups: list[Group], seeds: np.ndarray, tally: Tally
) -> tuple[Finding | None, np.ndarray, np.ndarray]:
    """:func:`compared_episodes` for several policies' episodes in one batch (``batch_groups``):
    returns and lengths per row of the batch."""
    spec = ctx.spec
    exact = spec.compare.mode == "exact"
    n = len(seeds)
    ref_state, port_state, finding = _start(ctx, seeds)
    if finding is not None:
        return finding, np.zeros(0), np.zeros(0)
    history: list[np.ndarray] = []
    active = np.arange(n)  # env ids still running
    returns = np.zeros(n)
    lengths = np.zeros(n, dtype=np.int64)
    obs = ctx.ref.observe(ref_state)
    for g in groups:
        g.policy.reset(g.hi - g.lo)
    max_steps = spec.verify.l3_max_steps or spec.episode_cap + 1
    for t in range(max_steps):
        masks = _masks(groups, active)
        acts = _act(spec, groups, masks, obs, t, ref_state)
        full = np.zeros((n, *spec.action.shape), dtype=spec.action.dtype)
        full[active] = acts
        history.append(full)
        start = time.perf_counter()
        # per episode and step, so envs in the same state at the same step draw apart
        salt = seeds[active].astype(np.uint64) * np.uint64(1 << 20) + np.uint64(t)
        pair = step_pair(ctx, ref_state, port_state if exact else ref_state, acts, salt)
        ref, port, diff = pair.ref, pair.port, pair.diff
        tally.seconds += time.perf_counter() - start
        tally.steps += len(active)
        if pair.ref_draws is not None:
            tally.draws += int(np.minimum(pair.ref_draws.count, pair.ref_draws.size).sum())
        tally.errors(diff)
        for g, m in zip(groups, masks, strict=True):
            name = g.policy.name
            tally.excused[name] = tally.excused.get(name, 0) + int(diff.excused[m].sum())
        _count_events(ctx, tally, groups, masks, 0, ref_state, ref, acts)
        port_before = port_state if exact else ref_state
        _count_events(ctx, tally, groups, masks, 1, port_before, port, acts)
        i = pair.first()
        if i is not None:
            env = int(active[i])
            name = next(g.policy.name for g in groups if g.lo <= env < g.hi)
            actions = [to_jsonable(h[env]) for h in history]
            how = "free-running" if exact else "re-synced, one step from the reference state"
            return (
                pair_finding(
                    ctx,
                    3,
                    "rollout.mismatch",
                    f"policy {name}: episode diverges in {{fields}} at step {t} ({how})",
                    pair,
                    i,
                    ref_state,
                    seed=int(seeds[env]),
                    step=t,
                    actions=actions,
                    extra={"policy": name},
                ),
                returns,
                lengths,
            )
        keep, active = _counted(ref, active, returns, lengths)
        if not len(active):
            break
        ref_state = take_state(ref.state, keep)
        port_state = take_state(port.state if exact else ref.state, keep)
        obs = ref.obs[keep]
    return None, returns, lengths


def free_port_episodes(
    ctx: VerifyContext,
    groups: list[Group],
    seeds: np.ndarray,
    tally: Tally,
    driver: Driver | None = None,
    draws: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Free-running episodes of ``driver`` (the port) from the reference's reset states (sync)
    or seeds, every group's in one batch; with ``draws``, each step's draws come from fresh
    seeds (distribution mode)."""
    spec = ctx.spec
    n = len(seeds)
    state = ctx.ref.reset(seeds) if spec.rng.mode == "sync" else ctx.port.reset(seeds)
    driver = driver or ctx.port
    obs = driver.observe(state)
    active = np.arange(n)
    returns = np.zeros(n)
    lengths = np.zeros(n, dtype=np.int64)
    for g in groups:
        g.policy.reset(g.hi - g.lo)
    for t in range(spec.verify.l3_max_steps or spec.episode_cap + 1):
        acts = _act(spec, groups, _masks(groups, active), obs, t, state)
        start = time.perf_counter()
        if draws is None:
            tr = driver.step(state, acts)
        else:
            fresh = draws.integers(0, 2**63, size=len(acts), dtype=np.uint64)
            tr, _ = driver.step_draws(state, acts, fresh, None)
        tally.seconds += time.perf_counter() - start
        tally.steps += len(active)
        keep, active = _counted(tr, active, returns, lengths)
        if not len(active):
            break
        state = take_state(tr.state, keep)
        obs = tr.obs[keep]
    return returns, lengths


def _counted(
    tr: Any, active: np.ndarray, returns: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One step of the ``active`` episodes counted into their returns and lengths: which rows
    go on (``keep``), and the episodes still running."""
    returns[active] += tr.reward
    lengths[active] += 1
    keep = ~(tr.terminated | tr.truncated)
    return keep, active[keep]
