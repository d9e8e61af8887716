"""The Driver contract: a batched, functional view of one implementation over canonical state.

The verifier only ever talks to Drivers. A canonical state is ``dict[name, ndarray[B, ...]]``
with the field names, dtypes and shapes declared in the EnvSpec. Drivers are pure from the
caller's view: a stateful reference is driven by writing the given state in, stepping once and
reading it back. There is no auto-reset: episode boundaries belong to the verifier.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envforge.coverage.lines import LineCoverage
from envforge.errors import ContractViolation
from envforge.native.digest.blocks import state_digests
from envforge.rng.draws import DrawLog, row_seeds
from envforge.spec import EnvSpec
from envforge.spec.parts import PartError

State = dict[str, np.ndarray]
DIGEST_ROWS = 1 << 16
"""Seeds reset and hashed at a time by ``Driver.reset_digest``: a few MiB of states, still in
cache when they are hashed (pong's Rust port swept fastest at about this size; the measured
rates varied too much from run to run here to say by how much)."""


@dataclass
class Transition:
    """Result of one batched step. ``reward`` is float64, flags are bool, all shaped ``[B]``."""

    state: State
    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray

    def expression_inputs(self, before: State, actions: np.ndarray | None) -> dict[str, Any]:
        """What a spec expression over this transition reads (``EnvSpec.expression``)."""
        return {
            "before": before,
            "after": self.state,
            "action": actions,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "obs": self.obs,
        }

    def take(self, index: np.ndarray | slice | int) -> Transition:
        idx = np.atleast_1d(np.arange(len(self.reward))[index])
        return Transition(
            state=take_state(self.state, idx),
            obs=self.obs[idx],
            reward=self.reward[idx],
            terminated=self.terminated[idx],
            truncated=self.truncated[idx],
        )


def flat_observation(spec: EnvSpec, obs: Any, side: str, batch: int | None = None) -> np.ndarray:
    """The first ``batch`` observations (or the one unbatched); a nested one (a dict or pytree
    of the spec's named parts) as the flat rows the verifier compares, where a missing or
    misshapen part is a contract violation that names it (``obs.image: shape [7, 7], expected
    [7, 7, 3]``)."""
    layout = spec.observation.layout
    if layout is None:
        return np.asarray(obs) if batch is None else np.asarray(obs)[:batch]
    try:
        return layout.flatten(obs, batch)
    except PartError as e:
        raise ContractViolation(side, "observation", str(e)) from None


class Driver(ABC):
    """One implementation (reference or port) seen through the canonical-state contract."""

    side: str = "port"

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec

    @abstractmethod
    def reset(self, seeds: np.ndarray) -> State:
        """Fresh states for each seed (``seeds``: uint32 ``[B]``)."""

    @abstractmethod
    def step(self, state: State, actions: np.ndarray) -> Transition:
        """One step of every env in the batch from the given states."""

    @abstractmethod
    def observe(self, state: State) -> np.ndarray:
        """Observations ``[B, *obs_shape]`` of the given states."""

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        """One step whose random draws are given: a reference draws from ``seeds`` (uint64
        ``[B]``) and records them; a port takes them from ``tape`` (the reference's log), or,
        without one, from its own generator seeded by ``seeds``. Returns the transition and the
        draws this side asked for (``rng/draws.py``). Only for specs with ``[rng] step``."""
        raise ContractViolation(
            self.side,
            "step_draws",
            f"{self.describe()} cannot take its draws from a tape or a seed, which "
            f"[rng] step = {self.spec.rng.step!r} needs (docs/SPEC.md, randomness inside step)",
        )

    def step_recorded(self, state: State, actions: np.ndarray) -> Transition:
        """``step`` for a reference that records its draws (the gymnasium and PettingZoo
        drivers): its draws seeded from the state and actions, and refused when the spec says
        the step draws nothing."""
        tr, log = self.step_draws(state, actions, row_seeds(state, actions), None)
        if self.spec.rng.step == "none" and log.count.any():
            i = int(np.flatnonzero(log.count)[0])
            raise ContractViolation(
                self.side,
                "step",
                f"{self.describe()} draws random numbers inside step (first: "
                f'{log.describe(i, 0)}); declare [rng] step = "tape" in env.toml to replay '
                'its draws to the port, or step = "distribution" to compare many samples '
                "with two-sample tests (docs/SPEC.md, randomness inside step)",
            )
        return tr

    def step_sequence(
        self, state: State, actions: np.ndarray, until_done: bool = False
    ) -> list[Transition]:
        """Step ``actions[0]``, ``actions[1]``, ... in turn from ``state`` in one call: one
        transition per action, each from the previous one's state. With ``until_done`` it
        stops after the first step that ends an episode of any env in the batch.

        One call instead of one per step: an isolated or sandboxed driver crosses its socket
        once (L2's long action runs were thousands of round trips)."""
        out: list[Transition] = []
        for action in actions:
            tr = self.step(state, action)
            out.append(tr)
            if until_done and bool(np.any(tr.terminated) or np.any(tr.truncated)):
                break
            state = tr.state
        return out

    def run_steps(self, batch: int, steps: int, seed: int) -> float:
        """Reset ``batch`` envs (seeds 0..batch-1) and step them ``steps`` times with uniform
        random actions, all in one call; the rewards' sum comes back as a checksum. The host
        times this call around a sandboxed driver: a throughput it measured itself, never a
        number the port printed (``translate/throughput.py``)."""
        rng = np.random.default_rng(seed)
        state = self.reset(np.arange(batch, dtype=np.uint32))
        total = 0.0
        for _ in range(steps):
            tr = self.step(state, self.spec.action.sample(rng, batch))
            total += float(np.sum(tr.reward))
            state = tr.state
        return total

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        """Digests (``digest.blocks``) of ``reset(seeds)``, one per ``block`` seeds.

        Computed where the driver runs, so an isolated or sandboxed driver sends back a few
        bytes per block instead of every state; the verifier's seed sweep compares these.
        Reset and hashed a whole number of blocks at a time (about ``DIGEST_ROWS`` seeds), so
        the states are still in cache when they are hashed."""
        if block < 1:
            raise ValueError("block must be positive")
        rows = max(1, DIGEST_ROWS // block) * block
        parts = [
            state_digests(
                self.spec,
                canonicalize(self.spec, self.reset(seeds[i : i + rows]), self.side, "reset"),
                block,
            )
            for i in range(0, len(seeds), rows)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint64)

    def reset_digest_range(self, start: int, count: int, block: int) -> np.ndarray:
        """``reset_digest`` of the seeds ``start, start + 1, ..., start + count - 1`` (uint32,
        wrapping): the sweep's calls, which an isolated driver sends as two numbers instead of
        an array of seeds, and a JAX driver makes on the device."""
        seeds = (np.arange(count, dtype=np.uint64) + np.uint64(start)).astype(np.uint32)
        return self.reset_digest(seeds, block)

    def reset_rows(self, state: State, done: np.ndarray, seeds: np.ndarray) -> State | None:
        """The implementation's own auto-reset (a Rust batch's ``reset_where``, which
        ``envforge.make`` and ``envforge bench`` use): ``state`` with the rows where ``done``
        reset from ``seeds``. None where the implementation has none (L0 then checks nothing)."""
        return None

    def step_own(self, state: State, actions: np.ndarray) -> Transition | None:
        """The step ``envforge.make`` and ``envforge bench`` take where it is not ``step``: a
        Rust batch's own ``step``, whose in-step draws come from the generator each env carries
        (``step`` under a tape spec draws from generators seeded by the row, as the verifier
        needs). None where the implementation has no such other step."""
        return None

    def step_training(
        self, state: State, actions: np.ndarray, seeds: np.ndarray
    ) -> Transition | None:
        """The step training takes where it is not the verified one, its draws from the
        implementation's own training generator seeded anew for each row from ``seeds`` (a JAX
        port's ``step`` under ``[rng] step``, which draws from ``state.key``). The verifier
        compares it in distribution (``verify/training_path.py``). None where there is no such
        other step, or it cannot be seeded per row."""
        return None

    def explain(self, state: State, actions: np.ndarray) -> list[str] | None:
        """The implementation's own words for what each env's step from ``state`` with
        ``actions`` will do (a JavaScript reference's optional ``explain`` export: which move,
        which types); None when it has none. Findings quote it."""
        return None

    def coverage_start(self) -> bool:
        """Start counting which reference lines run (forgetting earlier counts); False when
        this driver cannot (``coverage/lines.py``)."""
        return False

    def coverage_read(self) -> list[LineCoverage] | None:
        """The reference's line (and branch) coverage counted since ``coverage_start``, per
        source file; counting goes on. None when coverage was not started or is not known."""
        return None

    def reset_fingerprint(self) -> str | None:
        """A string that changes whenever this driver's resets could change (its code, build
        flags, compiler), or None when no such string is known. The verifier keeps a
        reference's reset digests under it (``verify/digest_cache.py``); None keeps nothing."""
        return None

    def source_files(self) -> list[Path]:
        """Files that implement this side, used to localize findings."""
        return []

    def describe(self) -> str:
        return type(self).__name__

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


# ---- canonical state helpers (the one translation routine everything reuses) ----------------


def take_state(state: State, idx: np.ndarray | slice | int) -> State:
    return {k: v[idx] for k, v in state.items()}


def concat_states(states: list[State]) -> State:
    return {k: np.concatenate([s[k] for s in states]) for k in states[0]}


def batch_size(state: State) -> int:
    return len(next(iter(state.values())))


def canonicalize(spec: EnvSpec, state: dict, side: str, call: str) -> State:
    """Check names and shapes of a state a driver produced, and cast to the spec's dtypes."""
    missing = [f.name for f in spec.state if f.name not in state]
    if missing:
        raise ContractViolation(side, call, f"canonical state lacks field(s) {missing}")
    extra = sorted(set(state) - set(spec.field_names))
    if extra:
        raise ContractViolation(side, call, f"canonical state has unknown field(s) {extra}")
    out: State = {}
    batch: int | None = None
    for f in spec.state:
        value = np.asarray(state[f.name])
        if value.ndim < 1:
            raise ContractViolation(
                side, call, f"field {f.name} is not batched (shape {value.shape})"
            )
        if tuple(value.shape[1:]) != tuple(f.shape):
            raise ContractViolation(
                side, call, f"field {f.name} has shape {value.shape[1:]}, spec says {f.shape}"
            )
        if batch is None:
            batch = value.shape[0]
        elif value.shape[0] != batch:
            raise ContractViolation(
                side, call, f"field {f.name} has batch {value.shape[0]} != {batch}"
            )
        out[f.name] = value.astype(f.np_dtype, copy=False)
    return out


def check_transition(spec: EnvSpec, tr: Transition, batch: int, side: str) -> Transition:
    """Normalize a transition's dtypes and check its shapes against the spec."""
    state = canonicalize(spec, tr.state, side, "step")
    obs = np.asarray(tr.obs)
    if obs.shape != (batch, *spec.observation.shape):
        raise ContractViolation(
            side,
            "step",
            f"observation shape {obs.shape}, expected {(batch, *spec.observation.shape)}",
        )
    out = []
    for name, value in (
        ("reward", tr.reward),
        ("terminated", tr.terminated),
        ("truncated", tr.truncated),
    ):
        arr = np.asarray(value)
        if arr.shape != (batch,):
            raise ContractViolation(side, "step", f"{name} shape {arr.shape}, expected {(batch,)}")
        out.append(arr)
    return Transition(
        state=state,
        obs=obs.astype(spec.observation.dtype, copy=False),
        reward=out[0].astype(np.float64),
        terminated=out[1].astype(bool),
        truncated=out[2].astype(bool),
    )
