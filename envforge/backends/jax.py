"""JAX backend: a port module with pure single-env functions; this backend vmaps and jits them.

Port contract (one module, gymnax style): ``envforge.kit.contract.JaxPort``, checked here on
import (:func:`envforge.kit.contract.lacks`)::

    reset(seed: uint32[]) -> EnvState
    step(state: EnvState, action) -> (EnvState, obs, reward, terminated, truncated)
    observe(state: EnvState) -> obs
    to_canonical(state: EnvState) -> dict[str, Array]
    from_canonical(fields: dict[str, Array]) -> EnvState

A port whose reference draws inside ``step`` (``[rng] step`` in the spec) also exports
``step_with_draws(state, action, draws)`` (``JaxPortWithDraws``), taking its random numbers
from an ``envforge.kit.Draws`` (a tape of the reference's draws, or its own key).

Batches are padded to the next power of two (at least 64) so varying batch sizes reuse a few
compiled shapes.
Strict float (no FMA on CPU) is chosen by the process environment (XLA_FLAGS) before jax loads.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition, batch_size, flat_observation
from envforge.errors import BadInput, ContractViolation
from envforge.kit.contract import JaxPort, JaxPortWithDraws, lacks, members
from envforge.native.digest.blocks import join
from envforge.rng.draws import DrawLog
from envforge.spec import EnvSpec

REQUIRED = members(JaxPort)
"""The functions every JAX port module defines (``envforge.kit.contract.JaxPort``)."""


def check_port_module(module: ModuleType, path: Path) -> None:
    """Raise the port's ContractViolation when ``module`` lacks a function of ``JaxPort``."""
    lacking = lacks(path.name, module, JaxPort)
    if lacking is not None:
        raise ContractViolation("port", "import", lacking)


def find_port_module(port: Path, env_name: str) -> Path:
    if port.is_file():
        return port
    for name in (f"{env_name}.py", "port.py"):
        if (port / name).is_file():
            return port / name
    candidates = [p for p in sorted(port.glob("*.py")) if not p.name.startswith(("test_", "_"))]
    if len(candidates) == 1:
        return candidates[0]
    raise BadInput(
        f"{port}: expected {env_name}.py or port.py (found {[p.name for p in candidates]})"
    )


def load_module(path: Path) -> ModuleType:
    name = f"envforge_port_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BadInput(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


MIN_PADDED_BATCH = 64
"""Smallest padded batch of every call: each batch shape compiles once (about a second on a
busy 2-core machine, per function), and the verifier calls with every size up to 64 (L1's
hypothesis batches, L3's batch shrinking as episodes end, L2's single envs). Stepping 64 rows
instead of one costs microseconds; each shape saved costs a compile."""


def _bucket(n: int) -> int:
    """The padded batch for ``n`` rows: a power of two, at least ``MIN_PADDED_BATCH``."""
    return max(MIN_PADDED_BATCH, 1 << max(0, n - 1).bit_length())


def _seed_halves(seeds: np.ndarray) -> np.ndarray:
    """uint64 seeds as ``[n, 2]`` uint32 (low, high): how the traced steps make their keys."""
    seeds = np.asarray(seeds, dtype=np.uint64)
    halves = np.stack([seeds & np.uint64(0xFFFFFFFF), seeds >> np.uint64(32)], axis=1)
    return halves.astype(np.uint32)


SEQUENCE_MIN_STEPS = 256
"""Shortest padded ``step_sequence``: L2's action runs (up to 200 steps) and sequences (up to
40) then share one compiled scan; a compile costs more (seconds) than 256 steps of one env."""


def _sequence_bucket(count: int) -> int:
    """Padded length of a ``step_sequence``: ``SEQUENCE_MIN_STEPS``, or the next power of two."""
    return max(SEQUENCE_MIN_STEPS, 1 << max(0, count - 1).bit_length())


class JaxDriver(Driver):
    def __init__(self, spec: EnvSpec, port: Path) -> None:
        super().__init__(spec)
        import jax
        import jax.numpy as jnp

        self._jnp = jnp
        self.module_path = find_port_module(port, spec.name)
        self.module = load_module(self.module_path)
        check_port_module(self.module, self.module_path)
        m = self.module

        def step_canonical(canon: dict, action: Any) -> tuple:
            s2, obs, reward, terminated, truncated = m.step(m.from_canonical(canon), action)
            return m.to_canonical(s2), obs, reward, terminated, truncated

        self._reset_canonical = jax.vmap(lambda seed: m.to_canonical(m.reset(seed)))
        self._reset = jax.jit(self._reset_canonical)
        self._step_vmapped = jax.vmap(step_canonical)
        self._step = jax.jit(self._step_vmapped)
        self._sequence: Any = None
        self._observe = jax.jit(jax.vmap(lambda canon: m.observe(m.from_canonical(canon))))
        self._x64 = bool(jax.config.read("jax_enable_x64"))
        self._step_draws: Any = None
        self._step_training: Any = None
        self._jax = jax
        self._native: bool | None = None
        self._digests: dict[int, Any] = {}
        self._range_digests: dict[tuple[int, int], Any] = {}
        self._rollouts: dict[tuple[int, int], Any] = {}

    # numpy <-> jax at the boundary, with padding to a power-of-two batch
    def _to_device(self, arr: np.ndarray, pad_to: int) -> Any:
        """``arr`` in the dtype and padded batch the jitted functions take. It stays a numpy
        array: the jitted call's own transfer is the fast one (pong, 300 rows: 10 state
        fields through ``jax.device_put`` cost 1.3 ms a step, the step itself 0.4 ms; and
        ``jnp.asarray`` compiles an identity computation for every new shape)."""
        if arr.dtype == np.float64 and not self._x64:
            arr = arr.astype(np.float32)
        elif arr.dtype in (np.int64, np.uint64) and not self._x64:
            arr = arr.astype(np.int32 if arr.dtype == np.int64 else np.uint32)
        if len(arr) < pad_to:
            arr = np.concatenate([arr, np.repeat(arr[:1], pad_to - len(arr), axis=0)])
        return np.ascontiguousarray(arr)

    def _state_in(self, state: State, pad_to: int) -> dict:
        return {k: self._to_device(np.asarray(v), pad_to) for k, v in state.items()}

    @staticmethod
    def _out(tree: Any, n: int) -> Any:
        if isinstance(tree, dict):
            return {k: np.asarray(v)[:n] for k, v in tree.items()}
        return np.asarray(tree)[:n]

    def reset(self, seeds: np.ndarray) -> State:
        n = len(seeds)
        out = self._reset(self._to_device(np.asarray(seeds, dtype=np.uint32), _bucket(n)))
        result: State = self._out(out, n)
        return result

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        """``digest.blocks`` computed in the same jitted call as the resets (no state leaves
        XLA), when every canonical field already has its spec dtype and 1 or 4 bytes and the
        seeds fill whole blocks; otherwise hashed in numpy like any driver."""
        n = len(seeds)
        if n == 0 or block < 1 or n % block or not self._digest_native():
            return super().reset_digest(seeds, block)
        if block not in self._digests:
            self._digests[block] = self._jax.jit(partial(self._digest, block=block))
        lo, hi = self._digests[block](np.asarray(seeds, dtype=np.uint32))
        return join(np.asarray(lo), np.asarray(hi))

    def reset_digest_range(self, start: int, count: int, block: int) -> np.ndarray:
        """The seeds are made inside the jitted call (``start`` is an argument: one compile
        per ``count``)."""
        if count == 0 or block < 1 or count % block or not self._digest_native():
            return super().reset_digest_range(start, count, block)
        key = (block, count)
        if key not in self._range_digests:
            jnp = self._jnp

            def digest(first: Any) -> tuple[Any, Any]:
                seeds = first + jnp.arange(count, dtype=jnp.uint32)
                return self._digest(seeds, block)

            self._range_digests[key] = self._jax.jit(digest)
        lo, hi = self._range_digests[key](np.uint32(start % (1 << 32)))
        return join(np.asarray(lo), np.asarray(hi))

    def _digest_native(self) -> bool:
        if self._native is None:
            probe = self._reset(self._jnp.zeros(1, self._jnp.uint32))
            self._native = all(
                f.name in probe
                and probe[f.name].dtype == f.np_dtype
                and f.np_dtype.itemsize in (1, 4)
                and probe[f.name].shape[1:] == tuple(f.shape)
                for f in self.spec.state
            )
        return self._native

    def _digest(self, seeds: Any, block: int) -> tuple[Any, Any]:
        from envforge.backends.jax_traced import digest_lanes

        return digest_lanes(self.spec, self._reset_canonical(seeds), seeds.shape[0], block)

    def step(self, state: State, actions: np.ndarray) -> Transition:
        n = batch_size(state)
        pad = _bucket(n)
        out = self._step(self._state_in(state, pad), self._to_device(np.asarray(actions), pad))
        return self._transition(out, n)

    def _transition(self, out: tuple, n: int) -> Transition:
        """The first ``n`` rows of a jitted step's (state, obs, reward, terminated, truncated)."""
        canon, obs, reward, terminated, truncated = out[:5]
        return Transition(
            state=self._out(canon, n),
            obs=self._obs_out(obs, n),
            reward=self._out(reward, n),
            terminated=self._out(terminated, n),
            truncated=self._out(truncated, n),
        )

    def step_sequence(
        self, state: State, actions: np.ndarray, until_done: bool = False
    ) -> list[Transition]:
        """All the steps in one jitted loop (one dispatch instead of one per step, which was
        most of L2's time). The actions are padded to ``_sequence_bucket`` steps, so one length
        compiles for L2, but the loop runs only ``len(actions)`` steps, and with ``until_done``
        stops after the step that ends an episode."""
        count = len(actions)
        if count == 0:
            return []
        if self._sequence is None:
            self._sequence = self._jax.jit(self._sequence_loop)
        n = batch_size(state)
        # every step of the loop costs the whole padded batch: pad rows only to a power of two
        pad, steps = 1 << max(0, n - 1).bit_length(), _sequence_bucket(count)
        acts = np.asarray(actions)
        if steps > count:
            acts = np.concatenate([acts, np.repeat(acts[-1:], steps - count, axis=0)])
        if n < pad:  # pad rows as _to_device does, all steps at once
            acts = np.concatenate([acts, np.repeat(acts[:, :1], pad - n, axis=1)], axis=1)
        device_acts = self._to_device(acts, 0)
        taken, (canon, obs, reward, terminated, truncated) = self._sequence(
            self._state_in(state, pad), device_acts, np.int32(count), np.bool_(until_done)
        )
        count = int(taken)
        states = {k: np.asarray(v)[:count, :n] for k, v in canon.items()}
        reward_, term_, trunc_ = (
            np.asarray(x)[:count, :n] for x in (reward, terminated, truncated)
        )
        at = self._jax.tree_util.tree_map
        obs_ = [self._obs_out(at(lambda x, t=t: x[t], obs), n) for t in range(count)]
        return [
            Transition(
                state={k: v[t] for k, v in states.items()},
                obs=obs_[t],
                reward=reward_[t],
                terminated=term_[t],
                truncated=trunc_[t],
            )
            for t in range(count)
        ]

    def _sequence_loop(self, canon: dict, acts: Any, count: Any, until_done: Any) -> tuple:
        """Traced: step ``acts[t]`` for t < ``count`` into buffers of ``len(acts)`` steps; with
        ``until_done``, stop after a step that ends an episode. Returns (steps taken, buffers)."""
        jax, jnp = self._jax, self._jnp
        shapes = jax.eval_shape(self._step_vmapped, canon, acts[0])
        buffers = jax.tree_util.tree_map(
            lambda x: jnp.zeros((acts.shape[0], *x.shape), x.dtype), shapes
        )

        def more(carry: tuple) -> Any:
            t, _, _, ended = carry
            return (t < count) & ~ended

        def step(carry: tuple) -> tuple:
            t, state, out, _ = carry
            result = self._step_vmapped(state, acts[t])
            out = jax.tree_util.tree_map(lambda buf, x: buf.at[t].set(x), out, result)
            ended = until_done & jnp.any(result[3] | result[4])
            return t + 1, result[0], out, ended

        t, _, out, _ = jax.lax.while_loop(
            more, step, (jnp.int32(0), canon, buffers, jnp.bool_(False))
        )
        return t, out

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        """The port's ``step_with_draws`` with draws from ``tape`` or, without one, from a
        ``jax.random`` key made from each row's seed."""
        from envforge.rng import jax_draws

        lacking = lacks(self.module_path.name, self.module, JaxPortWithDraws)
        if lacking is not None:
            needs = f"[rng] step = {self.spec.rng.step!r} needs it (docs/SPEC.md)"
            raise ContractViolation("port", "step_draws", f"{lacking}; {needs}")
        size = self.spec.rng.tape_size
        if self._step_draws is None:
            from envforge.backends.jax_traced import draws_step

            jax, m = self._jax, self.module
            self._step_draws = jax.jit(jax.vmap(draws_step(m, size)))
        n = batch_size(state)
        pad = _bucket(n)
        halves = _seed_halves(seeds)
        values = tape.value[:, :size] if tape is not None else np.zeros((n, size))
        if values.shape[1] < size:
            values = np.pad(values, ((0, 0), (0, size - values.shape[1])))
        taped = np.full(n, tape is not None)
        out = self._step_draws(
            self._state_in(state, pad),
            self._to_device(np.asarray(actions), pad),
            self._to_device(np.asarray(values, np.float64), pad),
            self._to_device(halves, pad),
            self._to_device(taped, pad),
        )
        kind, a, b, value, site, count = (self._out(x, n) for x in out[5])
        drawn = DrawLog(
            kind=kind.astype(np.int8),
            a=a.astype(np.float64),
            b=b.astype(np.float64),
            value=value.astype(np.float64),
            site=site.astype(np.int32),
            count=count.astype(np.int32),
            sites=list(jax_draws.SITES),
        )
        return self._transition(out, n), drawn

    def step_training(
        self, state: State, actions: np.ndarray, seeds: np.ndarray
    ) -> Transition | None:
        """The port's own ``step`` (what ``envforge.make``, bench and L4 training take) with the
        generator it keeps in its state as ``key`` replaced by one made from each row's seed,
        so one state stepped with n seeds gives n samples of the training path. None where the
        spec has no ``[rng] step`` (``step`` is then the verified step itself); a port whose
        state keeps no ``key`` of the key's shape breaks ``JaxPortWithDraws``."""
        if self.spec.rng.step == "none":
            return None
        if self._step_training is None:
            from envforge.backends.jax_traced import training_step

            jax, m = self._jax, self.module
            self._step_training = jax.jit(jax.vmap(training_step(m)))
        n = batch_size(state)
        pad = _bucket(n)
        halves = _seed_halves(seeds)
        out = self._step_training(
            self._state_in(state, pad),
            self._to_device(np.asarray(actions), pad),
            self._to_device(halves, pad),
        )
        return self._transition(out, n)

    def run_steps(self, batch: int, steps: int, seed: int) -> float:
        """``Driver.run_steps`` as one jitted ``lax.scan`` of the vmapped native step with
        random actions (compiled on the first call of a shape: time the second)."""
        jax, jnp, m, action = self._jax, self._jnp, self.module, self.spec.action
        step = jax.vmap(m.step)

        def body(carry: tuple, _: None) -> tuple:
            state, key, total = carry
            key, sub = jax.random.split(key)
            if action.type == "discrete":
                acts = jax.random.randint(sub, (batch,), 0, action.n or 1, dtype=jnp.int32)
            else:
                low, high = action.bounds()
                acts = jax.random.uniform(sub, (batch, *action.shape), jnp.float32, low, high)
            state, _obs, reward, _term, _trunc = step(state, acts)
            return (state, key, total + jnp.sum(reward).astype(jnp.float32)), None

        def rollout(key: Any) -> Any:
            state = jax.vmap(m.reset)(jnp.arange(batch, dtype=jnp.uint32))
            (_, _, total), _ = jax.lax.scan(body, (state, key, jnp.float32(0)), None, steps)
            return total

        compiled = self._rollouts.setdefault((batch, steps), jax.jit(rollout))
        return float(compiled(jax.random.PRNGKey(seed)))

    def observe(self, state: State) -> np.ndarray:
        n = batch_size(state)
        return self._obs_out(self._observe(self._state_in(state, _bucket(n))), n)

    def _obs_out(self, obs: Any, n: int) -> np.ndarray:
        return flat_observation(self.spec, obs, self.side, n)

    def source_files(self) -> list[Path]:
        return [self.module_path]

    def describe(self) -> str:
        return f"JAX port {self.module_path}"
