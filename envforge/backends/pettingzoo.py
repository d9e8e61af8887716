"""PettingZoo backend: an AEC env (turns taken one agent at a time) as a batched, functional
Driver over the seat model of the spec's ``[agents]`` table.

The reference is ``pettingzoo:<module>``, a module with ``env(**options)`` (every PettingZoo
env module has one): the env is built with its own wrappers, so an illegal action does on the
reference what it does for its users (``TerminateIllegalWrapper`` ends the game). Batch rows
are served by a pool of envs as in the gymnasium driver. A step on row ``i`` resets its env
(clearing what wrappers remember, the illegal-move wrapper's last observation), writes the
row into it and calls ``env.step`` once:

- game fields (those with ``attr``) are attributes of ``env.unwrapped`` (``attrs.py``); a list
  attribute (connect four's ``board``) is written back as a list, as the env keeps it;
- the seat fields go through PettingZoo's own bookkeeping: ``agent_selection`` (and the
  ``AgentSelector`` that picks the next agent) from ``current_player``, the ``rewards``,
  ``terminations`` and ``truncations`` dicts from theirs; cumulative rewards start at zero, as
  for an agent that has just collected its reward with ``last()``;
- read back, the action mask is each agent's ``observe(agent)["action_mask"]`` (or its info's),
  the observation each agent's ``observe(agent)["observation"]``, stacked agent first.

The transition's ``reward`` is the first agent's (its per-agent rewards are the ``rewards``
field); the episode is terminated (truncated) when every agent is.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.attrs import AttrMap, owner, stack_rows
from envforge.backends.base import Driver, State, Transition, batch_size, flat_observation
from envforge.coverage.lines import LineCoverage, PythonCoverage
from envforge.errors import BadInput, ContractViolation
from envforge.rng.draws import DrawLog
from envforge.rng.recorder import RowLog, UnsupportedDraw, logs_to_array, module_draws, recording
from envforge.spec import EnvSpec
from envforge.spec.tables import Agents

POOL_MAX = 64


def load_factory(module_name: str, what: str = "env") -> Any:
    """The module's ``env`` (or ``parallel_env``) function; bad input when there is none."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInput(f"pettingzoo:{module_name}: cannot import it ({e})") from None
    factory = getattr(module, what, None)
    if not callable(factory):
        raise BadInput(f"pettingzoo:{module_name}: the module has no {what}() function")
    return factory


def split_observation(value: Any) -> tuple[Any, Any]:
    """(observation, action mask or None) of what ``observe(agent)`` returned."""
    if isinstance(value, dict) and "observation" in value:
        return value["observation"], value.get("action_mask")
    return value, None


class PettingZooDriver(Driver):
    """Drives a PettingZoo AEC env through the spec's attr map and its ``[agents]`` table."""

    def __init__(self, spec: EnvSpec, module_name: str) -> None:
        super().__init__(spec)
        if spec.agents is None:
            raise BadInput(f"{spec.name}: a PettingZoo reference needs an [agents] table")
        self.agents: Agents = spec.agents
        self.names = list(spec.agents.names)
        self.module_name = module_name
        self.factory = load_factory(module_name)
        from pettingzoo.utils.env_logger import EnvLogger

        EnvLogger.suppress_output()  # illegal moves are stepped on purpose: no warning each
        self.envs: list[Any] = []
        self._coverage: PythonCoverage | None = None
        game = tuple(f for f in spec.state if f.attr is not None)
        self.attrs = AttrMap(spec.model_copy(update={"state": game}), allow_elapsed_steps=False)
        self._add_env()
        found = list(getattr(self.envs[0], "possible_agents", []))
        if found != self.names:
            raise BadInput(
                f"{spec.name}: [agents] names {self.names} are not the env's possible_agents "
                f"{found}"
            )

    # ---- pool ------------------------------------------------------------------------
    def _add_env(self) -> None:
        try:
            env = self.factory(**self.spec.options)
        except TypeError as e:
            raise BadInput(
                f"pettingzoo:{self.module_name} rejects the spec's [options]: {e}"
            ) from None
        env.reset(seed=len(self.envs))
        self.envs.append(env)

    def _pool(self, n: int) -> list[Any]:
        while len(self.envs) < min(n, POOL_MAX):
            self._add_env()
        return [self.envs[i % len(self.envs)] for i in range(n)]

    def load_row(self, env: Any, state: State, i: int) -> None:
        env.reset()
        raw = env.unwrapped
        lists = {path for path in self.attrs.attributes if isinstance(_get(raw, path), list)}
        self.attrs.write(raw, state, i)
        for path in lists:  # the env keeps these as Python lists: so must the written state
            obj, name = owner(raw, path)
            setattr(obj, name, np.asarray(getattr(obj, name)).tolist())
        seats = self.agents
        raw.agents = self.names[:]
        raw.rewards = {a: state[seats.rewards][i, k].item() for k, a in enumerate(self.names)}
        raw._cumulative_rewards = dict.fromkeys(self.names, 0)
        raw.terminations = {
            a: bool(state[seats.terminations][i, k]) for k, a in enumerate(self.names)
        }
        raw.truncations = {
            a: bool(state[seats.truncations][i, k]) for k, a in enumerate(self.names)
        }
        if seats.turns == "sequential" and seats.current_player is not None:
            seat = int(state[seats.current_player][i])
            if not 0 <= seat < len(self.names):
                raise ContractViolation(self.side, "step", f"current_player {seat} is no seat")
            raw.agent_selection = self.names[seat]
            selector = getattr(raw, "_agent_selector", None)
            if selector is not None:  # the selector hands out the agent after this one next
                selector.reinit(self.names[:])
                for _ in range(seat + 1):
                    selector.next()

    def read_row(self, env: Any) -> dict[str, np.ndarray]:
        raw = env.unwrapped
        row = self.attrs.read(raw)
        seats = self.agents
        row[seats.rewards] = np.array([float(raw.rewards.get(a, 0.0)) for a in self.names])
        row[seats.terminations] = np.array(
            [bool(raw.terminations.get(a, True)) for a in self.names]
        )
        row[seats.truncations] = np.array([bool(raw.truncations.get(a, False)) for a in self.names])
        if seats.turns == "sequential" and seats.current_player is not None:
            row[seats.current_player] = np.asarray(self.names.index(raw.agent_selection))
        if seats.action_mask is not None:
            row[seats.action_mask] = np.stack([self._mask(env, a) for a in self.names])
        return row

    def _mask(self, env: Any, agent: str) -> np.ndarray:
        _, mask = split_observation(env.observe(agent))
        if mask is None:
            mask = env.unwrapped.infos.get(agent, {}).get("action_mask")
        if mask is None:
            raise ContractViolation(self.side, "observe", f"{agent} has no action_mask")
        return np.asarray(mask).astype(bool)

    def observation_of(self, env: Any) -> np.ndarray:
        """Every agent's observation of ``env`` as it stands, agent first."""
        parts = [split_observation(env.observe(a))[0] for a in self.names]
        if self.spec.observation.layout is not None:  # one named part per agent
            return flat_observation(self.spec, dict(zip(self.names, parts, strict=True)), self.side)
        return np.stack([np.asarray(p) for p in parts]).astype(self.spec.observation.dtype)

    # ---- Driver ----------------------------------------------------------------------
    def reset(self, seeds: np.ndarray) -> State:
        rows = []
        for env, seed in zip(self._pool(len(seeds)), np.asarray(seeds), strict=True):
            with module_draws(int(seed)):
                env.reset(seed=int(seed))
            rows.append(self.read_row(env))
        return stack_rows(self.spec, rows)

    def step(self, state: State, actions: np.ndarray) -> Transition:
        return self.step_recorded(state, actions)

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        """A reference always draws (``tape`` is ignored): from ``seeds``, recorded."""
        n = batch_size(state)
        rows, obs, logs = [], [], []
        sites: dict[str, int] = {}
        for i, env in enumerate(self._pool(n)):
            self.load_row(env, state, i)
            log = RowLog(sites=sites)
            try:
                with recording(env.unwrapped, int(seeds[i]), log):
                    env.step(self.env_action(actions[i]))
            except UnsupportedDraw as e:
                raise ContractViolation(self.side, "step", str(e)) from None
            logs.append(log)
            rows.append(self.read_row(env))
            obs.append(self.observation_of(env))
        after = stack_rows(self.spec, rows)
        seats = self.agents
        transition = Transition(
            state=after,
            obs=np.stack(obs),
            reward=after[seats.rewards][:, 0].astype(np.float64),
            terminated=np.asarray(after[seats.terminations].all(axis=1)),
            truncated=np.asarray(after[seats.truncations].all(axis=1)),
        )
        return transition, logs_to_array(logs, self.spec.rng.tape_size, sites)

    def env_action(self, action: np.ndarray) -> Any:
        if self.spec.action.type == "discrete":
            return int(action)
        return np.asarray(action, dtype=np.float32).reshape(self.spec.action.shape)

    def observe(self, state: State) -> np.ndarray:
        out = []
        for i, env in enumerate(self._pool(batch_size(state))):
            self.load_row(env, state, i)
            out.append(self.observation_of(env))
        return np.stack(out)

    def source_files(self) -> list[Path]:
        source = inspect.getsourcefile(type(self.envs[0].unwrapped))
        return [Path(source)] if source else []

    def describe(self) -> str:
        return f"pettingzoo {self.module_name}"

    # ---- reference coverage: the raw env's file (its rules; the wrappers are the library's)
    def coverage_start(self) -> bool:
        if self._coverage is None:
            files = self.source_files()
            if not files:
                return False
            self._coverage = PythonCoverage(files[0])
        self._coverage.start()
        return True

    def coverage_read(self) -> list[LineCoverage] | None:
        return [self._coverage.read()] if self._coverage is not None else None

    def close(self) -> None:
        if self._coverage is not None:
            self._coverage.close()
        for env in self.envs:
            env.close()
        self.envs.clear()


def _get(root: Any, path: str) -> Any:
    obj, name = owner(root, path)
    return getattr(obj, name, None)
