"""Gymnasium backend: real gymnasium envs driven as a batched, functional Driver.

Batch rows are served in turn by a pool of at most ``POOL_MAX`` envs (row ``i`` by env
``i % POOL_MAX``; building thousands of envs cost more than stepping them: FrozenLake builds a
transition table in each). A step on row ``i`` resets its env (no seed: only to clear hidden
per-episode attributes), writes the row's canonical fields into it (see ``attrs.py``), calls
the wrapped ``env.step`` once and reads the canonical state back. The reset matters: CartPole, for one, keeps
``steps_beyond_terminated`` outside its state and pays reward 0 instead of 1 on a second
terminal step, so without it one row's history would leak into the next call's reward.
If a reference keeps meaningful state outside the canonical fields, its spec must map it.

Truncation comes only from the real ``TimeLimit`` wrapper made by ``gymnasium.make``; the
canonical field with attr ``@elapsed_steps`` is its counter. A field with attr ``@seed`` makes
that reset take the row's seed, so what reset builds from it (LunarLander's terrain) is there.

Every step runs with the env's generators replaced by recording stand-ins (``rng/recorder.py``)
seeded per row: by the verifier (``step_draws``) or by the row's state and action (``step``, so
the same input gives the same output). A reference that draws inside ``step`` under a spec
without ``[rng] step`` is refused with a line saying what to declare, never compared silently.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.attrs import AttrMap, stack_rows
from envforge.backends.base import Driver, State, Transition, batch_size, flat_observation
from envforge.backends.library_files import library_files
from envforge.coverage.lines import LineCoverage, PythonCoverage
from envforge.errors import ContractViolation
from envforge.rng.draws import DrawLog
from envforge.rng.recorder import (
    RowLog,
    UnsupportedDraw,
    logs_to_array,
    module_draws,
    recording,
)
from envforge.spec import EnvSpec

POOL_MAX = 64
OBSERVATION_METHODS = ("_get_obs", "_get_ob", "gen_obs")
"""Methods an env may have that compute its observation from its current state (in order)."""


def core(env: Any) -> Any:
    """The object that holds the state: the unwrapped env (a plain Python reference is itself)."""
    return getattr(env, "unwrapped", env)


def find_time_limit(env: Any) -> Any:
    """The TimeLimit wrapper in ``env``'s wrapper chain, or None."""
    from gymnasium.wrappers import TimeLimit

    layer = env
    while layer is not None:
        if isinstance(layer, TimeLimit):
            return layer
        layer = getattr(layer, "env", None)
    return None


class GymnasiumDriver(Driver):
    """Drives any object with gymnasium's ``reset``/``step`` API through the spec's attr map."""

    def __init__(self, spec: EnvSpec, env_id: str) -> None:
        super().__init__(spec)
        self.env_id = env_id
        self.envs: list[Any] = []
        self.time_limits: list[Any] = []  # per pooled env, found once
        self._coverage: PythonCoverage | None = None
        self._add_env()
        self.attrs = AttrMap(spec, allow_elapsed_steps=self.time_limits[0] is not None)

    # ---- what subclasses change -------------------------------------------------------
    def make_env(self) -> Any:
        from envforge.backends.gym_ids import make_env

        return make_env(self.env_id, self.spec.options)

    def time_limit_of(self, env: Any) -> Any:
        return find_time_limit(env)

    # ---- pool ------------------------------------------------------------------------
    def _add_env(self) -> None:
        env = self.make_env()
        # a fixed first seed makes the later seedless resets (and any step noise) repeatable
        env.reset(seed=len(self.envs))
        self.envs.append(env)
        self.time_limits.append(self.time_limit_of(env))

    def _pool(self, n: int) -> list[Any]:
        while len(self.envs) < min(n, POOL_MAX):
            self._add_env()
        return [self.envs[i % len(self.envs)] for i in range(n)]

    def load_row(self, i: int, state: State) -> None:
        """Env ``i`` with row ``i`` of ``state`` written into a freshly reset env (reset with
        the row's seed when the spec has a ``@seed`` field)."""
        k = i % len(self.envs)
        self.envs[k].reset(seed=self.attrs.seed_of(state, i))
        self.attrs.write(core(self.envs[k]), state, i, self.time_limits[k])

    def read_row(self, i: int) -> dict[str, np.ndarray]:
        k = i % len(self.envs)
        return self.attrs.read(core(self.envs[k]), self.time_limits[k])

    def env_action(self, action: np.ndarray) -> Any:
        if self.spec.action.type == "discrete":
            return int(action)
        return np.asarray(action, dtype=np.float32).reshape(self.spec.action.shape)

    def _observation(self, env: Any) -> np.ndarray:
        """The observation the env would return for its current state."""
        env_core = core(env)
        if self.spec.observation.attr is not None:
            return self.obs_row(getattr(env_core, self.spec.observation.attr))
        for method in OBSERVATION_METHODS:
            if callable(getattr(env_core, method, None)):
                return self.obs_row(getattr(env_core, method)())
        # classic control envs without such a method return their state as the observation
        return np.array(env_core.state, dtype=self.spec.observation.dtype)

    def obs_row(self, obs: Any) -> np.ndarray:
        """One observation as the verifier compares it: a copy in the spec's dtype (envs may
        alias their state), or the spec's named parts of a nested one as one flat row."""
        if self.spec.observation.layout is None:
            return np.array(obs, dtype=self.spec.observation.dtype)
        return flat_observation(self.spec, obs, self.side)

    # ---- Driver ----------------------------------------------------------------------
    def reset(self, seeds: np.ndarray) -> State:
        rows = []
        for i, (env, seed) in enumerate(
            zip(self._pool(len(seeds)), np.asarray(seeds), strict=True)
        ):
            with module_draws(int(seed)):
                env.reset(seed=int(seed))
            rows.append(self.read_row(i))
        return stack_rows(self.spec, rows)

    def step(self, state: State, actions: np.ndarray) -> Transition:
        return self.step_recorded(state, actions)

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        """A reference always draws (``tape`` is ignored): from ``seeds``, recorded."""
        n = batch_size(state)
        actions = np.asarray(actions)
        rows, obs, logs = [], [], []
        sites: dict[str, int] = {}
        reward = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        for i, env in enumerate(self._pool(n)):
            self.load_row(i, state)
            log = RowLog(sites=sites)
            try:
                with recording(core(env), int(seeds[i]), log):
                    o, r, term, trunc, _ = env.step(self.env_action(actions[i]))
            except UnsupportedDraw as e:
                raise ContractViolation(self.side, "step", str(e)) from None
            logs.append(log)
            rows.append(self.read_row(i))
            obs.append(self.obs_row(o))
            reward[i], terminated[i], truncated[i] = float(r), bool(term), bool(trunc)
        drawn = logs_to_array(logs, self.spec.rng.tape_size, sites)
        # only a tape has a size: in distribution mode the draws are not replayed to the port
        if self.spec.rng.step == "tape" and int(drawn.count.max(initial=0)) > drawn.size:
            i = int(np.argmax(drawn.count))
            raise ContractViolation(
                self.side,
                "step",
                f"drew {int(drawn.count[i])} numbers in one step; the spec's [rng] tape_size "
                f"is {drawn.size} (raise it)",
            )
        transition = Transition(
            state=stack_rows(self.spec, rows),
            obs=np.stack(obs),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
        )
        return transition, drawn

    def observe(self, state: State) -> np.ndarray:
        obs = []
        for i, env in enumerate(self._pool(batch_size(state))):
            self.load_row(i, state)
            obs.append(self._observation(env))
        return np.stack(obs)

    def source_files(self) -> list[Path]:
        source = inspect.getsourcefile(type(core(self.envs[0])))
        return ([Path(source)] if source else []) + library_files(self.spec)

    def describe(self) -> str:
        return f"gymnasium {self.env_id}"

    # ---- reference coverage (coverage.py, in this process) -------------------------------
    def _coverage_scope(self) -> PythonCoverage:
        """The env class's ``step``: the rest of a gymnasium env's file is rendering and
        registration, which the verifier never runs."""
        step = type(core(self.envs[0])).step
        source = inspect.getsourcefile(step)
        if source is None:
            raise ContractViolation(self.side, "coverage", "the env's step has no source file")
        lines, first = inspect.getsourcelines(step)
        name = step.__qualname__
        return PythonCoverage(Path(source), name, (first, first + len(lines) - 1))

    def coverage_start(self) -> bool:
        if self._coverage is None:
            self._coverage = self._coverage_scope()
        self._coverage.start()
        return True

    def coverage_read(self) -> list[LineCoverage] | None:
        return [self._coverage.read()] if self._coverage is not None else None

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        if self._coverage is None:
            return super().reset_digest(seeds, block)
        with self._coverage.paused():  # the seed sweep runs untraced, at full speed
            return super().reset_digest(seeds, block)

    def close(self) -> None:
        if self._coverage is not None:
            self._coverage.close()
        for env in self.envs:
            if callable(getattr(env, "close", None)):
                env.close()
        self.envs.clear()
        self.time_limits.clear()
