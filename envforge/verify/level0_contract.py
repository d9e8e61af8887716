"""Level 0 — contract: does each side build and honour the Driver API?

Checks names, shapes and dtypes (kinds) of states, observations, rewards and flags; reset states inside
the spec's ranges; observations inside the declared bounds along short random rollouts;
determinism (same input, same output); batch independence (a state stepped alone or inside a
batch gives the same result, which is what vmap must preserve); and observe() agreeing with
the observation a step returns.
"""

from __future__ import annotations

import numpy as np

from envforge.backends.base import (
    Driver,
    State,
    Transition,
    canonicalize,
    check_transition,
    take_state,
)
from envforge.errors import ContractViolation
from envforge.rng.draws import row_seeds
from envforge.verify.compare import compare_states, values_close
from envforge.verify.context import VerifyContext
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.level0_failure import failed_step
from envforge.verify.policies import random_actions
from envforge.verify.tape import step_pair
from envforge.verify.verdict import LevelResult

ROLLOUT_STEPS = 64
BATCH = 16


def _range_violations(ctx: VerifyContext, state: State) -> list[tuple[str, int]]:
    """(field, env index) pairs whose value lies outside the spec's declared range."""
    out = []
    for f in ctx.spec.state:
        v = state[f.name].astype(np.float64)
        low, high = f.limits(-np.inf, np.inf)
        bad: np.ndarray = (v < low) | (v > high)
        if f.pad is not None:
            bad &= v != f.pad  # a padded list's sentinel lies outside the items' range
        rows = np.flatnonzero(bad.reshape(len(v), -1).any(axis=1))
        if len(rows):
            out.append((f.name, int(rows[0])))
    return out


def _obs_out_of_bounds(ctx: VerifyContext, obs: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """The first env whose observation leaves the bounds, and the first element that does."""
    low, high = ctx.spec.observation.bounds()
    bad = ~np.isfinite(obs) | (obs < low) | (obs > high)
    rows = np.flatnonzero(bad.reshape(len(obs), -1).any(axis=1))
    if not len(rows):
        return None
    flat = int(np.flatnonzero(bad[rows[0]].reshape(-1))[0])
    return int(rows[0]), tuple(int(j) for j in np.unravel_index(flat, obs.shape[1:]))


AUTO_RESET_STEPS = 3
"""Steps taken before the auto-reset check, so that a row reset by mistake differs."""


class _Checker:
    """Runs the API checks on one driver; collects findings instead of stopping at the first."""

    def __init__(self, ctx: VerifyContext, driver: Driver) -> None:
        self.ctx = ctx
        self.driver = driver
        self.side = driver.side
        self.findings: list[Finding] = []
        self.dtype_reported: set[str] = set()

    def fail(self, check: str, message: str, **kw: object) -> None:
        keys = list(kw.pop("fields", []))  # type: ignore[call-overload]
        ref_lines, port_lines = self.ctx.localize(keys, None) if keys else ([], [])
        self.findings.append(
            Finding(
                level=0,
                check=f"contract.{check}",
                message=f"{self.side}: {message}",
                fields=keys,
                reference_lines=ref_lines,
                port_lines=port_lines,
                **kw,  # type: ignore[arg-type]
            )
        )

    def reset(self, seeds: np.ndarray) -> State:
        raw = self.driver.reset(seeds)
        state = canonicalize(self.ctx.spec, raw, self.side, "reset")
        self._dtype_kinds("reset", raw)
        return state

    def step(self, state: State, actions: np.ndarray) -> Transition:
        raw = self.driver.step(state, actions)
        tr = check_transition(self.ctx.spec, raw, len(actions), self.side)
        self._dtype_kinds("step", raw.state, raw)
        return tr

    def _dtype_kinds(self, call: str, state: dict, tr: Transition | None = None) -> None:
        """Canonicalizing casts to the spec's dtypes, which would hide a float counter or an int
        position, so compare kinds (bool, int, uint, float) of what the driver returned. Widths
        may differ: a JAX port without x64 returns float32 for a float64 field."""
        expected = {f.name: f.np_dtype for f in self.ctx.spec.state}
        got = {name: np.asarray(state[name]).dtype for name in expected}
        if tr is not None:
            expected.update(
                obs=np.dtype(self.ctx.spec.observation.dtype),
                terminated=np.dtype(bool),
                truncated=np.dtype(bool),
            )
            got.update(
                obs=np.asarray(tr.obs).dtype,
                terminated=np.asarray(tr.terminated).dtype,
                truncated=np.asarray(tr.truncated).dtype,
            )
        for name, dtype in expected.items():
            if got[name].kind != dtype.kind and name not in self.dtype_reported:
                self.dtype_reported.add(name)
                self.fail(
                    "dtype",
                    f"{call} returns {name} as {got[name]}, the spec says {dtype}",
                    fields=[name],
                )

    def auto_reset(self, seeds: np.ndarray, state: State) -> None:
        """A port's own auto-reset (``reset_where``: what envforge.make and bench step with)
        resets exactly the done rows, each as ``reset`` of its seed, and leaves the others."""
        done = np.arange(len(seeds)) % 2 == 0
        fresh = (seeds.astype(np.uint64) * 7919 + 1).astype(np.uint32)
        if self.side != "port" or self.driver.reset_rows(state, done, fresh) is None:
            return  # no auto-reset of its own (asked once on the reset state)
        rng = self.ctx.rng(7)
        for _ in range(AUTO_RESET_STEPS):  # away from reset, where every row may look alike
            state = self.step(state, random_actions(self.ctx.spec, rng, len(seeds))).state
        raw = self.driver.reset_rows(state, done, fresh)
        if raw is None:
            return
        rows = canonicalize(self.ctx.spec, raw, self.side, "reset_where")
        new = self.reset(fresh)
        expected = {
            name: np.where(done.reshape(-1, *[1] * (column.ndim - 1)), new[name], column)
            for name, column in state.items()
        }
        diff = compare_states(self.ctx.spec, expected, rows, exact=True)
        if diff.mismatch.any():
            i = int(np.flatnonzero(diff.mismatch)[0])
            what = f"reset from seed {int(fresh[i])}" if done[i] else "left as it was"
            self.fail(
                "reset_where",
                f"auto-reset (reset_where, used by envforge.make and bench): row {i} should be "
                f"{what}, and differs",
                fields=diff.keys_at(i),
                seed=int(fresh[i] if done[i] else seeds[i]),
            )

    def run(self) -> None:
        spec = self.ctx.spec
        seeds = np.arange(BATCH, dtype=np.uint32) + np.uint32(self.ctx.options.seed * 1000)
        state = self.reset(seeds)
        for name, i in _range_violations(self.ctx, state):
            self.fail(
                "reset_range",
                f"reset state field {name} outside the spec range",
                fields=[name],
                seed=int(seeds[i]),
                actual={name: to_jsonable(state[name][i])},
            )
        again = self.reset(seeds)
        diff = compare_states(spec, state, again, exact=True)
        if diff.mismatch.any():
            i = int(np.flatnonzero(diff.mismatch)[0])
            self.fail(
                "determinism",
                "reset with the same seed gave different states",
                fields=diff.keys_at(i),
                seed=int(seeds[i]),
            )
        self.auto_reset(seeds, state)
        obs = np.asarray(self.driver.observe(state))
        if obs.shape != (BATCH, *spec.observation.shape):
            raise ContractViolation(
                self.side,
                "observe",
                f"observation shape {obs.shape}, expected {(BATCH, *spec.observation.shape)}",
            )

        rng = self.ctx.rng(0)
        actions_seen: list[np.ndarray] = []
        # the rows whose episodes are still running: an ended episode is never stepped again
        # (a reference may refuse to step past its end, and nothing is specified there)
        rows = np.arange(BATCH)
        history: list[tuple[State, np.ndarray, np.ndarray]] = []  # (state, actions, rows) per step
        for t in range(ROLLOUT_STEPS):
            actions = np.zeros((BATCH, *spec.action.shape), dtype=spec.action.dtype)
            actions[rows] = random_actions(spec, rng, len(rows))
            actions_seen.append(actions)
            tr = self.rollout_step(state, actions[rows], rows, seeds, t, actions_seen)
            history.append((state, actions[rows], rows))
            self.own_step(state, actions[rows])
            if t == 0:
                self._determinism_and_batching(state, actions, tr)
            out_of_bounds = _obs_out_of_bounds(self.ctx, tr.obs)
            if out_of_bounds is not None:
                bad, element = out_of_bounds
                i = int(rows[bad])
                agent = spec.agents_named("obs", element)
                # the observation is usually out of bounds because a state field is: name it too
                culprits = [
                    n
                    for n, _ in _range_violations(
                        self.ctx, take_state(tr.state, slice(bad, bad + 1))
                    )
                ]
                diverged, where = self.diverged(history, i)
                self.fail(
                    "obs_bounds",
                    f"observation outside the declared bounds at {spec.element_name('obs', element)}"
                    + (
                        f" (state outside the spec range in {', '.join(culprits)})"
                        if culprits
                        else ""
                    )
                    + where,
                    fields=list(dict.fromkeys([*diverged, *culprits, "obs"])),
                    seed=int(seeds[i]),
                    step=t,
                    actions=[a[i] for a in actions_seen],
                    actual={"obs": to_jsonable(tr.obs[bad])},
                    **({"extra": {"agents": [agent]}} if agent else {}),
                )
                break
            live = ~(tr.terminated | tr.truncated)
            if not live.any():
                break
            rows, state = rows[live], take_state(tr.state, live)

    def rollout_step(
        self,
        state: State,
        actions: np.ndarray,
        rows: np.ndarray,
        seeds: np.ndarray,
        t: int,
        actions_seen: list[np.ndarray],
    ) -> Transition:
        """One step of the rollout's running episodes (``rows`` of the batch). A failure names
        the episode that failed: its seed, the step, the state it was given and its actions."""
        try:
            return self.step(state, actions)
        except Exception as exc:
            if isinstance(exc, ContractViolation):
                raise
            raise failed_step(self, exc, state, actions, rows, seeds, t, actions_seen) from exc

    def _determinism_and_batching(self, state: State, actions: np.ndarray, tr: Transition) -> None:
        again = self.step(state, actions)
        single = self.step(take_state(state, slice(0, 1)), actions[:1])
        for label, other, n in (("determinism", again, BATCH), ("batch_independence", single, 1)):
            for key in [*self.ctx.spec.field_names, "obs", "reward", "terminated", "truncated"]:
                a = tr.state[key][:n] if key in tr.state else getattr(tr, key)[:n]
                b = other.state[key] if key in other.state else getattr(other, key)
                if not values_close(a, b, 0.0, 0.0).all():
                    what = (
                        "the same step twice differs"
                        if label == "determinism"
                        else "env 0 stepped alone differs from env 0 in a batch"
                    )
                    self.fail(
                        label,
                        f"{what} (field {key})",
                        fields=[key],
                        state_before=to_jsonable({k: v[0] for k, v in state.items()}),
                    )
                    break
        observed = np.asarray(self.driver.observe(tr.state))
        if not values_close(tr.obs, observed, 0.0, 0.0).all():
            i = int(np.flatnonzero(~values_close(tr.obs, observed, 0.0, 0.0))[0])
            diverged, where = self.diverged([(state, actions, np.arange(len(actions)))], i)
            self.fail(
                "observe_consistency",
                "observe(next_state) differs from the observation step returned" + where,
                fields=[*diverged, "obs"],
            )

    def own_step(self, state: State, actions: np.ndarray) -> None:
        """The step ``envforge.make`` and bench take, where it is not ``step`` (a Rust batch's
        own, its draws from each env's generator): where ``step`` took no draw it must give
        the same transition, and ``observe`` its observation. Before, nothing ran it."""
        once = any(f.check == "contract.own_step" for f in self.findings)  # one finding is enough
        own = self.driver.step_own(state, actions) if self.side == "port" and not once else None
        if own is None:
            return
        own = check_transition(self.ctx.spec, own, len(actions), self.side)
        taped, drawn = self.driver.step_draws(state, actions, row_seeds(state, actions), None)
        same = np.flatnonzero(drawn.count == 0)
        keys = [*self.ctx.spec.field_names, "obs", "reward", "terminated", "truncated"]
        for key in keys if len(same) else []:
            a = taped.state[key] if key in taped.state else getattr(taped, key)
            b = own.state[key] if key in own.state else getattr(own, key)
            close = values_close(a[same], b[same], 0.0, 0.0).reshape(len(same), -1).all(axis=1)
            if not close.all():
                i = int(same[np.flatnonzero(~close)[0]])
                self.fail(
                    "own_step",
                    f"the batch's own step (envforge.make, bench) differs from step in {key} "
                    "where step took no draw",
                    fields=[key],
                    state_before=to_jsonable({k: v[i] for k, v in state.items()}),
                    actions=[to_jsonable(actions[i])],
                )
                return
        if not values_close(own.obs, np.asarray(self.driver.observe(own.state)), 0.0, 0.0).all():
            self.fail(
                "own_step",
                "the batch's own step (envforge.make, bench) returns an observation that "
                "observe(next_state) does not give",
                fields=["obs"],
            )

    def diverged(
        self, history: list[tuple[State, np.ndarray, np.ndarray]], episode: int
    ) -> tuple[list[str], str]:
        """Where the port's observation is wrong, is its step? Episode ``episode``'s steps of
        ``history`` are taken again on both sides from the port's states (with the reference's
        draws under a tape); the keys of the first step that differs, and words saying where.
        Nothing when every step agrees or the reference cannot take one (then the observation
        alone is at fault, as far as L0 can tell)."""
        if self.side != "port":
            return [], ""
        for t, (state, actions, rows) in enumerate(history):
            hit = np.flatnonzero(rows == episode)
            if not len(hit):
                return [], ""
            at = int(hit[0])
            one = take_state(state, slice(at, at + 1))
            try:
                pair = step_pair(self.ctx, one, one, actions[at : at + 1])
            except Exception:  # the reference refuses the port's state: no comparison
                return [], ""
            if pair.diff.mismatch.any():
                keys = pair.diff.keys_at(0)
                return keys, (
                    f"; the reference's step {t} from the port's state differs in "
                    + ", ".join(keys)
                )
        return [], ""


def run(ctx: VerifyContext) -> LevelResult:
    findings: list[Finding] = []
    for driver in (ctx.ref, ctx.port):
        checker = _Checker(ctx, driver)
        try:
            checker.run()
        except ContractViolation as e:
            checker.fail(e.call, str(e))
        if driver.side == "reference" and checker.findings:
            return LevelResult(
                0,
                "error",
                "the reference breaks the contract (spec or reference is wrong): "
                f"{checker.findings[0].check}: {checker.findings[0].message}",
                checker.findings,
                reference_failed=True,
            )
        findings.extend(checker.findings)
    if findings:
        return LevelResult(0, "fail", f"{len(findings)} contract violation(s)", findings)
    return LevelResult(
        0,
        "pass",
        "API, shapes, dtypes, bounds, determinism, batching ok",
        stats={"batch": BATCH, "rollout_steps": ROLLOUT_STEPS},
    )
