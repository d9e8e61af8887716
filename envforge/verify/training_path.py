"""The training path under a tape spec: the step ``envforge.make``, bench and L4 train on.

Under ``[rng] step = "tape"`` every exact check steps a port through ``step_with_draws`` with
the tape's draws. A JAX port's own ``step`` takes another path: it draws from the generator it
keeps in its state (``state.key``), through the speed layer's ``HashDraws`` when the layer is
on, and code may run only there (UNO deals lazily from its draw pile:
``speed_layer.shuffles_lazily``). A bug on that path changes what a user trains on and no
exact check can see it (a campaign's mutant did exactly that, docs/SPEED_LAYER.md).

So L1 ends with distribution mode's single-step tests (``distribution_l1.py``: states over the
whole horizon and several policies, coverage steering to the reference's rare lines, rare
events sought, the power statement) with the port's side stepped by its training step
(``Driver.step_training``: the port's ``step``, its ``key`` made from each sample's seed)
against the reference with fresh draws. A field the spec declares ``shuffled`` (a draw pile
whose order nothing shows) has its items shuffled before each sampled step, on both sides, and
is compared as a multiset: a lazy deal is then the same as dealing the top of a shuffled pile.

``TRAINING_SCALE`` of the verify's ``--scale`` is spent here (the exact checks before it are
the stronger evidence for everything both paths share).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition, batch_size, take_state
from envforge.coverage.lines import LineCoverage
from envforge.rng.draws import DrawLog
from envforge.spec import EnvSpec
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding

TRAINING_SCALE = 0.5
"""Share of ``--scale`` the training-path tests take (their states, candidates and samples)."""
CHECK = "step.training_distribution"


def piles(spec: EnvSpec) -> list[tuple[str, float]]:
    """The ``shuffled`` fields and their ``pad`` sentinels."""
    return [(f.name, float(f.pad)) for f in spec.state if f.shuffled and f.pad is not None]


def _reorder(values: np.ndarray, pad: float, keys: np.ndarray) -> np.ndarray:
    """Each row's items in the order of ``keys`` (a float per element), the pads behind them."""
    keys = np.where(values == pad, np.inf, keys)
    return np.take_along_axis(values, np.argsort(keys, axis=1, kind="stable"), axis=1)


def shuffle_piles(spec: EnvSpec, state: State, seeds: np.ndarray) -> State:
    """``state`` with each shuffled pile's items in a uniformly random order per row (the pads
    stay behind them); the same ``seeds`` give the same orders."""
    found = piles(spec)
    if not found:
        return state
    rng = np.random.default_rng(np.asarray(seeds, dtype=np.uint64).tolist() or [0])
    out = dict(state)
    for name, pad in found:
        values = np.asarray(state[name])
        out[name] = _reorder(values, pad, rng.random(values.shape))
    return out


def sort_piles(spec: EnvSpec, tr: Transition) -> Transition:
    """``tr`` with each shuffled pile's items sorted (the pads behind them): a multiset."""
    found = piles(spec)
    if not found:
        return tr
    fields = dict(tr.state)
    for name, pad in found:
        values = np.asarray(fields[name])
        fields[name] = _reorder(values, pad, values.astype(np.float64))
    return Transition(fields, tr.obs, tr.reward, tr.terminated, tr.truncated)


class Sampled(Driver):
    """One side as distribution mode's machinery steps it: ``step_draws`` without a tape is a
    sampled step (the reference's with fresh draws; with ``training``, the port's training step
    seeded by the row), from states whose shuffled piles are shuffled first and sorted after.
    ``coverage``: whether the reference's coverage may be restarted (not while the runner is
    measuring L1's)."""

    def __init__(self, inner: Driver, training: bool, coverage: bool = True) -> None:
        super().__init__(inner.spec)
        self.inner = inner
        self.side = inner.side
        self.training = training
        self.coverage = coverage

    def reset(self, seeds: np.ndarray) -> State:
        return self.inner.reset(seeds)

    def step(self, state: State, actions: np.ndarray) -> Transition:
        return self.inner.step(state, actions)

    def observe(self, state: State) -> np.ndarray:
        return self.inner.observe(state)

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        assert tape is None, "the training path is sampled, never replayed"
        before = shuffle_piles(self.spec, state, seeds)
        if self.training:
            tr = self.inner.step_training(before, actions, seeds)
            assert tr is not None
            log = DrawLog.empty(batch_size(state), 1)
        else:
            tr, log = self.inner.step_draws(before, actions, seeds, None)
        return sort_piles(self.spec, tr), log

    def coverage_start(self) -> bool:
        return self.coverage and self.inner.coverage_start()

    def coverage_read(self) -> list[LineCoverage] | None:
        return self.inner.coverage_read() if self.coverage else None

    def source_files(self) -> list[Path]:
        return self.inner.source_files()

    def describe(self) -> str:
        return self.inner.describe() + (" (training step)" if self.training else "")


def has_training_path(driver: Driver, state: State, actions: np.ndarray) -> bool:
    """Whether ``driver`` has a training step other than the verified one (one row tried)."""
    one = take_state(state, slice(0, 1))
    return driver.step_training(one, actions[:1], np.zeros(1, np.uint64)) is not None


def check(
    ctx: VerifyContext, state: State, actions: np.ndarray, measuring: bool
) -> tuple[Finding | None, dict[str, Any], str]:
    """The training-path tests (``state``, ``actions``: one row to probe the port with).
    Returns the finding, the stats (under ``training_path``) and a summary clause ("" when the
    port has no other training step). ``measuring``: the runner measures L1's coverage, so
    no steering (it would restart that coverage)."""
    from envforge.verify.distribution_l1 import run as run_distributions

    if not has_training_path(ctx.port, state, actions):
        return None, {}, ""
    options = replace(ctx.options, scale=max(0.01, ctx.options.scale * TRAINING_SCALE))
    sub = VerifyContext(
        ctx.spec,
        Sampled(ctx.ref, False, coverage=not measuring),
        Sampled(ctx.port, True),
        options,
        ctx.port_files,
        ctx.sandbox,
    )
    result = run_distributions(sub)
    stats = {k: v for k, v in result.stats.items() if k != "notes"}
    stats.update(notes=result.notes, shuffled_piles=[name for name, _ in piles(ctx.spec)])
    if measuring:
        stats["notes"].append("no coverage steering: the run measures the reference's coverage")
    if result.finding is not None:
        finding = replace(
            result.finding,
            check=CHECK,
            message="the port's training step (envforge.make, bench, L4; its own key) "
            f"against the reference: {result.finding.message}",
        )
        return finding, {"training_path": stats}, ""
    summary = (
        f"; its training step (its own key) agrees in distribution: "
        f"{stats['distribution_tests']} two-sample tests from {stats['states_tested']} states"
    )
    return None, {"training_path": stats}, summary
