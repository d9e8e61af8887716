"""The ``[agents]`` table checked against the rest of a spec: its fields exist with the
shapes and dtypes their roles need, the observation is laid out agent by agent (first axis or
named parts), and a simultaneous game's action is a joint one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envforge.errors import SpecError
from envforge.spec.tables import Agents

if TYPE_CHECKING:
    from envforge.spec.load import EnvSpec


def check_agents(p: Path, spec: EnvSpec, agents: Agents) -> None:
    """The ``[agents]`` table's fields exist with the shapes and dtypes their roles need."""
    n = len(agents.names)
    if len(set(agents.names)) != n:
        raise SpecError(p, "agents.names", "unique agent names", list(agents.names))
    layout = spec.observation.layout
    if layout is not None:  # one part (or parts "<agent>.<name>") per agent
        owners = {name.split(".", 1)[0] for name in layout.names}
        if owners != set(agents.names):
            raise SpecError(
                p,
                "observation.parts",
                "parts named by agent (<agent> or <agent>.<part>)",
                sorted(owners),
            )
    elif spec.observation.shape[:1] != (n,):
        raise SpecError(
            p, "observation.shape", f"the agent first ({n} agents)", list(spec.observation.shape)
        )
    n_actions = spec.action.n or 0
    roles: list[tuple[str, str | None, tuple[str, ...], tuple[int, ...]]] = [
        ("rewards", agents.rewards, ("float32", "float64"), (n,)),
        ("terminations", agents.terminations, ("bool",), (n,)),
        ("truncations", agents.truncations, ("bool",), (n,)),
        ("action_mask", agents.action_mask, ("bool",), (n, n_actions)),
    ]
    if agents.turns == "sequential":
        roles.append(("current_player", agents.current_player, ("int32", "int64"), ()))
        if agents.current_player is None:
            raise SpecError(p, "agents.current_player", "a field for sequential turns")
    for role, name, dtypes, shape in roles:
        if name is None:
            continue
        if name not in spec.field_names:
            raise SpecError(p, f"agents.{role}", "the name of a state field", name)
        f = spec.field(name)
        if f.dtype not in dtypes or tuple(f.shape) != shape:
            raise SpecError(
                p,
                f"agents.{role}",
                f"a field of dtype {' or '.join(dtypes)} and shape {list(shape)}",
                f"{name}: {f.dtype} {list(f.shape)}",
            )
    for i, f in enumerate(spec.state):
        if f.per_agent and f.shape[:1] != (n,):
            raise SpecError(p, f"state[{i}].shape", f"the agent first ({n} agents)", f.shape)
    if agents.turns == "simultaneous" and (
        spec.action.type == "discrete" or spec.action.shape[:1] != (n,)
    ):
        raise SpecError(
            p, "action", f"a joint action for simultaneous turns: continuous, shape [{n}, ...]"
        )
