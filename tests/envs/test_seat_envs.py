"""``envforge.make`` over a port of several agents: PettingZoo's own ``api_test`` on the AEC
env, the same games on it and on the PettingZoo reference, and the Pgx-style functional API
under jit and vmap.
"""

from __future__ import annotations

import numpy as np
import pytest

import envforge
from envforge.errors import BadInput

pytest.importorskip("pettingzoo")


@pytest.fixture(scope="module")
def aec():  # type: ignore[no-untyped-def]
    return envforge.make("connect_four", api="pettingzoo")


def test_the_aec_env_passes_pettingzoos_api_test(aec) -> None:  # type: ignore[no-untyped-def]
    from pettingzoo.test import api_test

    api_test(aec, num_cycles=300)


def _play(env, seed: int, moves: list[int]) -> list[tuple]:  # type: ignore[no-untyped-def]
    """What every agent sees through ``agent_iter`` while ``moves`` are played in turn."""
    env.reset(seed=seed)
    seen = []
    queue = list(moves)
    for agent in env.agent_iter(200):
        obs, reward, terminated, truncated, _ = env.last()
        seen.append(
            (
                agent,
                obs["observation"].astype(int).tolist(),
                obs["action_mask"].tolist(),
                float(reward),
                terminated,
                truncated,
            )
        )
        env.step(None if terminated or truncated else queue.pop(0))
    return seen


def test_games_on_the_port_are_the_references_games(aec) -> None:  # type: ignore[no-untyped-def]
    from pettingzoo.classic import connect_four_v3

    reference = connect_four_v3.env()
    rng = np.random.default_rng(3)
    for game in range(6):
        moves = rng.integers(0, 7, 60).tolist()  # illegal moves included: a full column ends it
        if game % 2:
            moves = [3, 4, 3, 4, 3, 4, 3] + moves  # player_0 wins down the middle
        assert _play(aec, game, moves) == _play(reference, game, moves)


def test_the_pgx_api_is_jit_and_vmap_able_and_pays_each_player() -> None:
    import jax
    import jax.numpy as jnp

    env = envforge.make("connect_four", api="pgx")
    assert (env.num_players, env.num_actions, env.observation_shape) == (2, 7, (6, 7, 2))
    state = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(0), 4))
    assert state.current_player.tolist() == [0] * 4 and state.legal_action_mask.all()
    step = jax.jit(jax.vmap(env.step))
    for column in (3, 4, 3, 4, 3, 4):
        state = step(state, jnp.full(4, column, jnp.int32))
        assert not state.terminated.any()
    assert state.current_player.tolist() == [0] * 4
    state = step(state, jnp.full(4, 3, jnp.int32))
    assert state.terminated.all() and state.rewards.tolist() == [[1.0, -1.0]] * 4
    state = step(state, jnp.zeros(4, jnp.int32))  # a finished game stays finished
    assert state.terminated.all() and not state.rewards.any()


def test_a_single_agent_env_has_no_seat_apis() -> None:
    with pytest.raises(BadInput, match="several agents taking turns"):
        envforge.make("cartpole", api="pgx")
