"""The one place where both sides take a step together, with the RNG tape when the spec has one.

Under ``[rng] step = "tape"`` the reference steps with recording stand-ins for its generators
(seeded per row from the state, the action and a salt the level chooses), and the port steps
with the reference's recorded draws as its tape. The port's own log of what it asked for is
then accounted for draw by draw: the same number of draws, each of the same kind with the same
parameters, or the step is an ``rng.tape`` finding that names the draw, the step, what each
side asked for, and the line on each side that drew. Without a tape both sides simply step.

Every level (L1 single steps, L2 programs, L3 episodes) steps through :func:`step_pair` and
builds its finding with :func:`pair_finding`.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from envforge.backends.base import State, Transition
from envforge.rng.draws import DrawLog, describe_draw, row_seeds
from envforge.verify.compare import Diff, compare_transitions
from envforge.verify.findings import Finding, SourceLocation
from envforge.verify.localize import source_lines

if TYPE_CHECKING:
    from envforge.verify.context import VerifyContext

PARAM_RTOL = 1e-6
"""Draw parameters agree within this (a float32 port asks uniform(-0.05f, 0.05f))."""


@dataclass
class PairStep:
    """Both sides' transitions from one batched step, compared; and the draws, when taped."""

    ref: Transition
    port: Transition
    diff: Diff
    ref_draws: DrawLog | None = None
    port_draws: DrawLog | None = None
    tape_bad: np.ndarray | None = None
    """Per env: the port's draws do not account for the reference's."""
    tape_at: np.ndarray | None = None
    """Per env: index of the first draw that differs (kind, parameters or count)."""

    @property
    def mismatch(self) -> np.ndarray:
        bad = self.diff.mismatch
        return bad | self.tape_bad if self.tape_bad is not None else bad

    def first(self) -> int | None:
        idx = np.flatnonzero(self.mismatch)
        return int(idx[0]) if len(idx) else None


def step_pair(
    ctx: VerifyContext,
    ref_state: State,
    port_state: State,
    actions: np.ndarray,
    salt: int | np.ndarray = 0,
) -> PairStep:
    """One step of both sides with the same actions (and the same draws, under a tape)."""
    spec = ctx.spec
    if spec.rng.step != "tape":
        ref, port = _both(ctx, ref_state, port_state, actions)
        return PairStep(ref, port, compare_transitions(spec, ref, port, ref_state, actions))
    seeds = row_seeds(ref_state, actions, salt)
    ref, ref_draws = ctx.ref.step_draws(ref_state, actions, seeds, None)
    port, port_draws = ctx.port.step_draws(port_state, actions, seeds, ref_draws)
    diff = compare_transitions(spec, ref, port, ref_state, actions)
    bad, at = account(ref_draws, port_draws)
    return PairStep(ref, port, diff, ref_draws, port_draws, bad, at)


_PORT_CALLS = ThreadPoolExecutor(1, thread_name_prefix="envforge-port-step")
"""Steps the port while this thread steps the reference: each side is its own process, so the
two round trips overlap instead of adding up (L3 makes thousands of them)."""


def _both(
    ctx: VerifyContext, ref_state: State, port_state: State, actions: np.ndarray
) -> tuple[Transition, Transition]:
    """Both sides' step, side by side. The reference's failure wins, as when it stepped first."""
    port_call = _PORT_CALLS.submit(ctx.port.step, port_state, actions)
    try:
        ref = ctx.ref.step(ref_state, actions)
    except BaseException:
        wait([port_call])
        raise
    return ref, port_call.result()


def account(ref: DrawLog, port: DrawLog) -> tuple[np.ndarray, np.ndarray]:
    """Per env: whether the port's draws differ from the reference's, and the first that does
    (same kind and parameters draw by draw, then the same count)."""
    size = min(ref.size, port.size)
    common = np.minimum(np.minimum(ref.count, port.count), size)
    same = (ref.kind[:, :size] == port.kind[:, :size]) & _close(ref.a, port.a, size)
    same &= _close(ref.b, port.b, size)
    inside = np.arange(size)[None, :] < common[:, None]
    differs = inside & ~same
    first_differs = np.where(differs.any(axis=1), differs.argmax(axis=1), common)
    bad = differs.any(axis=1) | (ref.count != port.count)
    return bad, first_differs.astype(np.int64)


def _close(a: np.ndarray, b: np.ndarray, size: int) -> np.ndarray:
    x, y = a[:, :size], b[:, :size]
    return np.abs(x - y) <= PARAM_RTOL * np.maximum(np.abs(x), np.abs(y)) + 1e-12


def _asked(log: DrawLog, i: int, j: int) -> str:
    if j >= int(log.count[i]):
        return f"no draw #{j} (drew {int(log.count[i])} in all)"
    if j >= log.size:
        return f"draw #{j} past the end of the {log.size}-draw tape"
    return describe_draw(int(log.kind[i, j]), float(log.a[i, j]), float(log.b[i, j]))


def source_location(site: str, sources: list[Path] | None = None) -> SourceLocation | None:
    """``path:line`` as a location with the line's text (None if the file cannot be read, or
    with ``sources`` is not one of them: a port's sites name files it chose)."""
    path, _, line = site.rpartition(":")
    if sources is not None and os.path.normpath(path) not in {str(p) for p in sources}:
        return None
    try:
        text = source_lines(path, os.stat(path, follow_symlinks=False).st_mtime)[int(line) - 1]
    except (OSError, ValueError, IndexError):
        return None
    return SourceLocation(file=path, line=int(line), text=text)


def _lines(log: DrawLog, i: int, j: int, sources: list[Path] | None = None) -> list[SourceLocation]:
    """Where draw ``j`` was asked (the innermost frame first), in ``sources`` if given."""
    if j >= min(int(log.count[i]), log.size):
        return []
    out = []
    for part in log.site_of(i, j).split(" <- "):
        loc = source_location(part, sources)
        if loc is not None:
            out.append(loc)
    return out


def pair_finding(
    ctx: VerifyContext,
    level: int,
    check: str,
    message: str,
    pair: PairStep,
    i: int,
    state_before: State | None,
    only: list[str] | None = None,
    **extra: Any,
) -> Finding:
    """The finding for env ``i`` of a compared pair: ``rng.tape`` when the draws do not
    account (what each side asked for at the first differing draw, and where), else the
    diff's finding; under a tape, either lists the draws the reference made."""
    step = extra.get("step")
    at = f" at step {step}" if step is not None else ""
    if pair.tape_bad is not None and pair.tape_bad[i]:
        assert (
            pair.ref_draws is not None and pair.port_draws is not None and pair.tape_at is not None
        )
        j = int(pair.tape_at[i])
        ref_asked, port_asked = _asked(pair.ref_draws, i, j), _asked(pair.port_draws, i, j)
        keys = pair.diff.keys_at(i)
        finding = ctx.finding_from_diff(
            level,
            "rng.tape",
            f"draw #{j}{at}: the reference asked {ref_asked}, the port asked {port_asked}"
            + (" (then {fields} differ)" if keys else ""),
            pair.diff,
            i,
            pair.ref,
            pair.port,
            state_before,
            only,
            **extra,
        )
        finding.reference_lines = _lines(pair.ref_draws, i, j) or finding.reference_lines
        port_lines = _lines(pair.port_draws, i, j, ctx.port_sources())
        finding.port_lines = port_lines or finding.port_lines
        finding.extra["draw"] = {
            "index": j,
            "reference": ref_asked,
            "port": port_asked,
            "reference_count": int(pair.ref_draws.count[i]),
            "port_count": int(pair.port_draws.count[i]),
        }
    else:
        finding = ctx.finding_from_diff(
            level, check, message, pair.diff, i, pair.ref, pair.port, state_before, only, **extra
        )
    if pair.ref_draws is not None:
        draws = pair.ref_draws.row_summary(i)
        finding.extra["reference_draws"] = draws
        if check != "rng.tape" and finding.check != "rng.tape":
            finding.message += "; draws replayed: " + ("; ".join(draws) or "none")
    return finding
