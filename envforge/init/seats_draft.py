"""Draft the spec of a PettingZoo AEC env (``pettingzoo:<module>``): its agents and seats from
PettingZoo's own API, its game state from what the probe saw change.

1. Probe: games of random legal moves (and some uniform ones, illegal moves included) through
   ``agent_iter``; every numeric attribute of ``env.unwrapped`` (and of its plain objects one
   level down: tic-tac-toe's ``board.squares``) that changes is a candidate game field.
2. ``[agents]``: ``possible_agents``, turn by turn, the action mask when observations carry one,
   an illegal move's effect from the module's own wrappers (``TerminateIllegalWrapper`` and
   its reward), zero-sum when every step the probe saw paid nothing in total.
3. Spaces: one agent's ``observation_space(agent)["observation"]``, agent first; its
   ``action_space`` (discrete).
4. The self-check (``seats_selfcheck.py``) decides whether the drafted state is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.pettingzoo import load_factory, split_observation
from envforge.errors import BadInput
from envforge.init.draft import Draft
from envforge.init.fields import FieldDraft
from envforge.init.spaces import action_table, observation_table

BOOKKEEPING = {
    "agents",
    "possible_agents",
    "rewards",
    "_cumulative_rewards",
    "terminations",
    "truncations",
    "infos",
    "agent_selection",
    "_agent_selector",
    "_skip_agent_selection",
    "observation_spaces",
    "action_spaces",
    "render_mode",
    "screen",
    "clock",
}
"""PettingZoo's own attributes: the seat fields hold what of them is state."""
GAMES = 48
UNIFORM_EVERY = 4
"""Every fourth probe game plays uniform actions: illegal moves show what they do."""


@dataclass
class SeatProbe:
    """What the probe games saw."""

    names: list[str]
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)
    longest: int = 0
    rewards: list[np.ndarray] = field(default_factory=list)
    sums_zero: bool = True
    resets_alike: bool = True
    illegal_ends: int = 0
    steps: int = 0


def numeric(value: Any) -> np.ndarray | None:
    """A number, a flat list of numbers or a numeric array as an array; None otherwise."""
    if isinstance(value, bool | int | float | np.number):
        return np.asarray(value)
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, bool | int | float | np.number) for v in value)
    ):
        return np.asarray(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf" and value.size:
        return value.copy()
    return None


def snapshot(raw: Any) -> dict[str, np.ndarray]:
    """Every numeric attribute of the raw env, and of its plain objects one level down."""
    out: dict[str, np.ndarray] = {}
    for name, value in vars(raw).items():
        if name in BOOKKEEPING or name.startswith("__"):
            continue
        found = numeric(value)
        if found is not None:
            out[name] = found
        elif hasattr(value, "__dict__") and not callable(value):
            for sub, inner in vars(value).items():
                found = numeric(inner)
                if found is not None and not sub.startswith("__"):
                    out[f"{name}.{sub}"] = found
    return out


def illegal_rule(env: Any) -> tuple[str, float]:
    """What the module's wrappers do with an illegal move: ``terminate`` and the mover's
    reward (PettingZoo's ``TerminateIllegalWrapper``), else ``allowed``."""
    from pettingzoo.utils.wrappers import TerminateIllegalWrapper

    layer = env
    while layer is not None:
        if isinstance(layer, TerminateIllegalWrapper):
            return "terminate", float(layer._illegal_value)
        layer = getattr(layer, "env", None)
    return "allowed", -1.0


def probe_games(make: Callable[[], Any], games: int = GAMES) -> SeatProbe:
    from pettingzoo.utils.env_logger import EnvLogger

    EnvLogger.suppress_output()  # the uniform games make illegal moves on purpose
    env = make()
    names = list(env.possible_agents)
    seen = SeatProbe(names)
    first: dict[str, np.ndarray] | None = None
    for game in range(games):
        env.reset(seed=game)
        rng = np.random.default_rng(game)
        start = snapshot(env.unwrapped)
        if first is None:
            first = start
        elif any(not np.array_equal(first[k], v) for k, v in start.items()):
            seen.resets_alike = False
        _keep(seen, start)
        length = 0
        for agent in env.agent_iter(10_000):
            obs, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            _, mask = split_observation(obs)
            mask = mask if mask is not None else info.get("action_mask")
            n = int(env.action_space(agent).n)
            legal = np.flatnonzero(mask) if mask is not None else np.arange(n)
            uniform = game % UNIFORM_EVERY == UNIFORM_EVERY - 1 or not len(legal)
            env.step(int(rng.integers(0, n) if uniform else rng.choice(legal)))
            length += 1
            seen.steps += 1
            _keep(seen, snapshot(env.unwrapped))
            rewards = np.array([float(env.unwrapped.rewards.get(a, 0.0)) for a in names])
            seen.rewards.append(rewards)
            ended_by_illegal = all(env.unwrapped.truncations.get(a, False) for a in names)
            seen.illegal_ends += int(ended_by_illegal)
            if abs(rewards.sum()) > 1e-9 and not ended_by_illegal:
                seen.sums_zero = False
        seen.longest = max(seen.longest, length)
    env.close()
    return seen


def _keep(seen: SeatProbe, snap: dict[str, np.ndarray]) -> None:
    for name, value in snap.items():
        seen.values.setdefault(name, []).append(value)


def game_fields(seen: SeatProbe) -> list[FieldDraft]:
    """Each attribute that changed, of one shape throughout, as a field of its seen range."""
    out = []
    for path, values in seen.values.items():
        if len({v.shape for v in values}) != 1 or all(np.array_equal(values[0], v) for v in values):
            continue
        stacked = np.stack(values).astype(np.float64)
        whole = bool(np.all(stacked == np.round(stacked)))
        dtype = "bool" if values[0].dtype == bool else "int32" if whole else "float32"
        low, high = float(stacked.min()), float(stacked.max())
        draft = FieldDraft(
            name=path.replace(".", "_"),
            dtype=dtype,
            attr=path,
            source_attr=path,
            shape=tuple(values[0].shape),
            integral=whole,
            seen=(low, high),
            notes=[f"observed: env.unwrapped.{path}, {low:g} to {high:g} in the probe"],
        )
        if dtype != "bool":
            draft.low, draft.high = (int(low), int(high)) if whole else (low, high)
        out.append(draft)
    return out


def seat_fields(
    seen: SeatProbe, n_actions: int, mask: bool, illegal_reward: float
) -> list[FieldDraft]:
    n = len(seen.names)
    rewards = np.stack(seen.rewards) if seen.rewards else np.zeros((1, n))
    low = float(min(rewards.min(), illegal_reward, 0.0))
    high = float(max(rewards.max(), 0.0))
    fields = [
        FieldDraft("current_player", "int32", "", "agent_selection", low=0, high=n - 1),
        FieldDraft("rewards", "float32", "", "rewards", shape=(n,), low=low, high=high),
        FieldDraft("terminations", "bool", "", "terminations", shape=(n,)),
        FieldDraft("truncations", "bool", "", "truncations", shape=(n,)),
    ]
    fields[0].notes = ["whose turn: agent_selection as a seat (the [agents] table)"]
    fields[1].notes = [f"each agent's reward of the last step (seen {low:g} to {high:g})"]
    if mask:
        fields.append(
            FieldDraft("legal_action_mask", "bool", "", "action_mask", shape=(n, n_actions))
        )
        fields[-1].notes = ["each agent's observe(agent)['action_mask'] (read only)"]
    return fields


def draft_seat_spec(reference: str, name: str, root: Any, options: dict[str, Any]) -> Draft:
    """The drafted spec of a PettingZoo AEC env (its self-check not yet run)."""
    module = reference.split(":", 1)[1]
    factory = load_factory(module)

    def make() -> Any:
        return factory(**options)

    env = make()
    env.reset(seed=0)
    names = list(env.possible_agents)
    space = env.observation_space(names[0])
    parts = getattr(space, "spaces", None)
    part = parts["observation"] if isinstance(parts, dict) and "observation" in parts else space
    has_mask = isinstance(parts, dict) and "action_mask" in parts
    if not hasattr(env.action_space(names[0]), "n"):
        raise BadInput(f"{reference}: only discrete actions are drafted for several agents yet")
    illegal, illegal_reward = illegal_rule(env)
    env.close()
    observation, note, _ = observation_table(part, own_dtype=False)
    observation["shape"] = [len(names), *observation["shape"]]
    action = action_table(env.action_space(names[0]))
    seen = probe_games(make)
    fields = game_fields(seen) + seat_fields(seen, action["n"], has_mask, illegal_reward)
    agents: dict[str, Any] = {"names": names, "turns": "sequential"}
    if has_mask:
        agents["action_mask"] = "legal_action_mask"
    agents.update(illegal=illegal, illegal_reward=illegal_reward, zero_sum=seen.sums_zero)
    events = [{"name": "game_over", "expr": "terminated"}]
    if seen.illegal_ends:
        events.append({"name": "illegal_move", "expr": "terminated & truncated"})
    return Draft(
        name=name,
        reference=reference,
        probe=None,
        fields=fields,
        observation=observation,
        observation_note=f"each agent's observation, agent first: {note}",
        action=action,
        action_note="the current player's action",
        probed=f"Probed with {GAMES} games through agent_iter ({seen.steps} moves).",
        episode_cap=max(seen.longest, 1),
        episode_cap_note="observed: the longest game the probe played (GUESS: the rules' longest)",
        events=events,
        state_note="the game attributes the probe saw change, then the seats",
        rng={"mode": "replicate" if seen.resets_alike else "sync"},
        rng_note=(
            "every reset the probe made was alike"
            if seen.resets_alike
            else "resets differ by seed: the port's resets are compared in distribution"
        ),
        compare={"mode": "exact"},
        compare_note="board games: every field is a whole number",
        options=dict(options),
        agents=agents,
        agents_note=(
            f"from PettingZoo: possible_agents, {'an action mask, ' if has_mask else ''}"
            f"illegal moves {illegal}"
            + (f" (reward {illegal_reward:g})" if illegal == "terminate" else "")
            + (", zero-sum in every step the probe saw" if seen.sums_zero else "")
        ),
        root=root,
    )
