"""A JAX port of several agents taking turns where people train self-play: as a PettingZoo AEC
env (``envforge.make(env, api="pettingzoo")``) and as a functional API like Pgx's
(``api="pgx"``).

Both sit on one seat model, the port's (``envforge.kit.contract.JaxTurnBasedPort``): its state,
whose turn it is, every agent's observation and mask, and the spec's per-agent fields read
through ``to_canonical``. They only convert at the edge: the AEC env keeps PettingZoo's
dicts and ``agent_iter`` bookkeeping (dead agents stepped with ``None``, PettingZoo's own
``_was_dead_step``), the functional API hands back a pytree.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envforge.errors import BadInput
from envforge.spec import EnvSpec
from envforge.spec.tables import Agents


def seats_of(spec: EnvSpec) -> Agents:
    """The spec's ``[agents]`` table, which both APIs need taken turn by turn."""
    if spec.agents is None or spec.agents.turns != "sequential":
        raise BadInput(
            f"{spec.name}: the pettingzoo and pgx APIs need a spec with [agents] turns = "
            '"sequential" (several agents taking turns)'
        )
    if spec.observation.layout is not None:
        raise BadInput(
            f"{spec.name}: the pettingzoo and pgx APIs take agent-first observations; this "
            "spec's are named parts"
        )
    return spec.agents


class SeatState(NamedTuple):
    """One game as Pgx shows it: the player to move's observation and legal actions, every
    player's reward of the last step, and the port's own state (``env_state``)."""

    current_player: jax.Array
    observation: jax.Array
    legal_action_mask: jax.Array
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    env_state: Any


class FunctionalSeats:
    """``init(key) -> state`` and ``step(state, action, key=None) -> state``: pure, jit- and
    vmap-able, no auto-reset (a finished game stays finished, its rewards zero). ``key`` in
    ``step`` is unused: a port's in-step randomness comes from the key in its own state."""

    def __init__(self, port: ModuleType, spec: EnvSpec) -> None:
        self.port = port
        self.seats = seats_of(spec)
        self.id = spec.name
        self.num_players = len(self.seats.names)
        self.num_actions = int(spec.action.n or 0)
        self.observation_shape = tuple(spec.observation.shape[1:])

    def init(self, key: jax.Array) -> SeatState:
        seed = jax.random.bits(key, dtype=jnp.uint32)
        return self.view(self.port.reset(seed))

    def step(self, state: SeatState, action: jax.Array, key: jax.Array | None = None) -> SeatState:
        env_state = self.port.step(state.env_state, action)[0]
        return self.view(env_state)

    def view(self, env_state: Any) -> SeatState:
        fields = self.port.to_canonical(env_state)
        player = self.port.current_player(env_state)
        return SeatState(
            current_player=player,
            observation=self.port.observe(env_state)[player],
            legal_action_mask=self.port.legal_action_mask(env_state)[player],
            rewards=fields[self.seats.rewards].astype(jnp.float32),
            terminated=fields[self.seats.terminations].all(),
            truncated=fields[self.seats.truncations].all(),
            env_state=env_state,
        )


def port_aec_env(port: ModuleType, spec: EnvSpec) -> Any:
    """The port as a PettingZoo ``AECEnv`` (one game; the port's functions jitted once)."""
    from gymnasium import spaces
    from pettingzoo import AECEnv

    seats = seats_of(spec)
    names = list(seats.names)
    low, high = spec.observation.bounds()
    n_actions = int(spec.action.n or 0)
    reset_fn, step_fn = jax.jit(port.reset), jax.jit(port.step)
    read = jax.jit(
        lambda s: (
            port.to_canonical(s),
            port.observe(s),
            port.legal_action_mask(s),
            port.current_player(s),
        )
    )

    class PortAECEnv(AECEnv):
        metadata = {"name": f"{spec.name}_envforge", "render_modes": [], "is_parallelizable": False}

        def __init__(self) -> None:
            super().__init__()
            self.possible_agents = names[:]
            self.agents = names[:]
            part = spaces.Box(low[0], high[0], spec.observation.shape[1:], np.float32)
            mask = spaces.Box(0, 1, (n_actions,), np.int8)
            self.observation_spaces = {
                a: spaces.Dict({"observation": part, "action_mask": mask}) for a in names
            }
            self.action_spaces = {a: spaces.Discrete(n_actions) for a in names}
            self.render_mode = None
            self._rng = np.random.default_rng()

        def observation_space(self, agent: str) -> Any:
            return self.observation_spaces[agent]

        def action_space(self, agent: str) -> Any:
            return self.action_spaces[agent]

        def reset(self, seed: int | None = None, options: dict | None = None) -> None:
            if seed is not None:
                self._rng = np.random.default_rng(seed)
            for space in (*self.observation_spaces.values(), *self.action_spaces.values()):
                space.seed(None if seed is None else int(seed))
            port_seed = np.uint32(self._rng.integers(0, 2**32))
            self._state = reset_fn(port_seed)
            self.agents = names[:]
            self._cumulative_rewards = dict.fromkeys(names, 0.0)
            self.infos: dict[str, dict] = {a: {} for a in names}
            self._read()

        def _read(self) -> None:
            fields, obs, masks, player = jax.device_get(read(self._state))
            self._obs, self._masks = np.asarray(obs), np.asarray(masks)
            live = self.agents
            rewards = np.asarray(fields[seats.rewards])
            done = np.asarray(fields[seats.terminations])
            cut = np.asarray(fields[seats.truncations])
            self.rewards = {a: float(rewards[names.index(a)]) for a in live}
            self.terminations = {a: bool(done[names.index(a)]) for a in live}
            self.truncations = {a: bool(cut[names.index(a)]) for a in live}
            self._player = int(player)
            self.agent_selection = names[self._player]

        def observe(self, agent: str) -> Any:
            # the selected agent sees the moves of the port's player to move, the others none
            # (PettingZoo's convention, which holds while dead agents are stepped out too)
            legal = self._masks[self._player] if agent == self.agent_selection else 0
            return {
                "observation": self._obs[names.index(agent)].astype(np.float32),
                "action_mask": np.zeros(n_actions, np.int8) + np.asarray(legal, np.int8),
            }

        def step(self, action: Any) -> None:
            agent = self.agent_selection
            if self.terminations[agent] or self.truncations[agent]:
                self._was_dead_step(action)
                return
            self._cumulative_rewards[agent] = 0.0
            self._state = step_fn(self._state, jnp.int32(action))[0]
            self._read()
            self._accumulate_rewards()  # whose turn after the end is the port's to say

        def render(self) -> None:
            return None  # no rendering: the port has none

        def close(self) -> None:
            pass

    return PortAECEnv()
