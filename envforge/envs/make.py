"""``envforge.make``: a verified port as an environment other training code can use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envforge.errors import BadInput
from envforge.resolve import resolve_port, spec_for_port
from envforge.spec import EnvSpec, load_spec, spec_for_name
from envforge.targets import Target, get_target, target_names, target_of_port

TARGETS = target_names()
APIS = ("gymnax", "vector", "gymnasium", "pettingzoo", "pgx")


def resolve(env: str | Path, target: str | None, spec: str | Path | None) -> tuple[EnvSpec, Path]:
    """The spec and the port directory for an env name (``references/<env>``) or a port path
    (``generated/<env>/<target>``; its spec is ``references/<env>/env.toml`` unless given)."""
    path = Path(env)
    if path.exists() and (len(path.parts) > 1 or path.suffix == ".py"):
        return spec_for_port(path, spec=spec), path
    target = get_target(str(target), "target").name
    env_spec = load_spec(spec) if spec else spec_for_name(str(env))
    return env_spec, resolve_port(env_spec, None, target)


def make(
    env: str | Path,
    target: str = "jax",
    num_envs: int | None = None,
    *,
    api: str | None = None,
    autoreset_mode: Any = "NextStep",
    strict_float: bool | None = None,
    spec: str | Path | None = None,
) -> Any:
    """A port of ``env`` as an environment.

    ``env`` is an env name (``"pong"``, ``"cartpole"``: its ``target`` port) or a port path
    (``generated/pong/rust``; the target is read from it). What comes back (``api``):

    - ``"vector"`` (the default when ``num_envs`` is given): a ``gymnasium.vector.VectorEnv`` of
      ``num_envs`` envs, auto-resetting in ``autoreset_mode`` (gymnasium's default NEXT_STEP, or
      SAME_STEP); JAX and Rust ports.
    - ``"gymnax"`` (the default for a JAX port without ``num_envs``): gymnax's functional API.
    - ``"gymnasium"`` (the default for a Rust port without ``num_envs``): one ``gymnasium.Env``.
    - ``"pettingzoo"`` (several agents taking turns, JAX ports): a PettingZoo ``AECEnv``, one game.
    - ``"pgx"`` (the same): Pgx's functional API, ``init(key)`` and ``step(state, action)`` over
      a state with ``current_player``, ``observation``, ``legal_action_mask``, ``rewards`` (one
      per player), ``terminated`` and ``truncated``; jit- and vmap-able.

    ``strict_float`` (Rust): flush subnormals as the strict verification did; default from the
    spec. A JAX port computes with the process's XLA flags (``XLA_FLAGS=--xla_cpu_max_isa=SSE4_2``
    before jax is imported reproduces the strict verification's arithmetic).

    Not sandboxed: the port's code runs in this process, as its caller (the one deliberate
    exception to "every port runs in the sandbox", with ``envforge train``). Make a port you
    trust, such as one envforge verified and you read.
    """
    env_spec, port = resolve(env, target, spec)
    kind = target_of_port(port)
    api = api or ("vector" if num_envs is not None else kind.default_api)
    if api not in APIS:
        raise BadInput(f"api must be one of {', '.join(APIS)}, got {api!r}")
    if api in ("pettingzoo", "pgx"):
        if not kind.python_module or num_envs is not None:
            raise BadInput(f"the {api} API is one game of a JAX port (vmap the pgx one)")
        return make_seats(env_spec, port, api)
    if api == "gymnax":
        if not kind.python_module:
            raise BadInput(f"the gymnax API needs a JAX port; {port} is a {kind.name} port")
        if num_envs is not None:
            raise BadInput("the gymnax API is one env: vmap it instead of passing num_envs")
        return make_gymnax(env_spec, port)
    n = 1 if api == "gymnasium" else num_envs
    if n is None or n < 1:
        raise BadInput(f"num_envs must be a positive integer, got {num_envs!r}")
    if api == "gymnasium" and num_envs not in (None, 1):
        raise BadInput("the gymnasium API is one env: use api='vector' for num_envs > 1")
    batch = make_batch(env_spec, port, kind, n, strict_float)
    from envforge.envs.gym_envs import PortEnv, PortVectorEnv

    if api == "gymnasium":
        return PortEnv(env_spec, batch)
    return PortVectorEnv(env_spec, batch, autoreset_mode)


def make_seats(env_spec: EnvSpec, port: Path, api: str) -> Any:
    from envforge.envs.seat_envs import FunctionalSeats, port_aec_env, seats_of
    from envforge.train.port_env import load_port

    seats_of(env_spec)
    module = load_port(port, env_spec.name)
    return (
        port_aec_env(module, env_spec) if api == "pettingzoo" else FunctionalSeats(module, env_spec)
    )


def make_gymnax(env_spec: EnvSpec, port: Path) -> Any:
    from envforge.envs.gymnax_env import GymnaxEnv
    from envforge.train.port_env import load_port

    return GymnaxEnv(load_port(port, env_spec.name), env_spec)


def make_batch(
    env_spec: EnvSpec, port: Path, kind: Target, num_envs: int, strict_float: bool | None
) -> Any:
    """The port's batch, as its target's ``make_batch`` builds it."""
    strict = env_spec.compare.strict_float if strict_float is None else strict_float
    build = kind.load_code("make_batch")
    if build is None:
        raise BadInput(f"envforge.make does not support {kind.title} ports yet ({port})")
    return build(env_spec, port, num_envs, strict)


def rust_batch(env_spec: EnvSpec, port: Path, num_envs: int, strict: bool) -> Any:
    from envforge.envs.batches import RustBatch

    return RustBatch(env_spec, port, num_envs, strict)


def jax_batch(env_spec: EnvSpec, port: Path, num_envs: int, strict: bool) -> Any:
    from envforge.envs.batches import JaxBatch
    from envforge.train.port_env import load_port

    return JaxBatch(load_port(port, env_spec.name), num_envs)
