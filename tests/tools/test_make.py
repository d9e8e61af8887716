"""envforge.make: the ports as gymnasium vector envs, single gymnasium envs and gymnax envs.

Checked with gymnasium's own tools (env_checker.check_env, the passive checkers, its
SyncVectorEnv as the reference implementation of the autoreset modes, its vector wrappers) and
against the C reference itself for the first episode (the wrapper must pass the port's
verified outputs through unchanged).
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.utils.passive_env_checker import check_obs
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import envforge
from envforge.backends.c import CDriver
from envforge.errors import BadInput
from envforge.spec import spec_for_name

ROOT = Path(__file__).resolve().parents[2]
HAS_RUST = shutil.which("cargo") is not None and (
    shutil.which("maturin") is not None or (Path(sys.executable).parent / "maturin").exists()
)
needs_rust = pytest.mark.skipif(not HAS_RUST, reason="needs cargo and maturin")
TARGETS = [pytest.param("rust", marks=needs_rust), "jax"]


def run_random(env: gym.vector.VectorEnv, steps: int, seed: int) -> list[tuple]:
    env.action_space.seed(seed)
    out = [env.reset(seed=seed)[0]]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        out.append((obs, reward, terminated, truncated, info))
    return out


@needs_rust
def test_make_pong_rust_is_a_working_vector_env() -> None:
    env = envforge.make("pong", target="rust", num_envs=64)
    assert isinstance(env, gym.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.num_envs == 64 and env.single_action_space == gym.spaces.Discrete(3)
    # gymnasium's vector wrappers accept it (the observation wrapper checks the autoreset mode)
    wrapped = gym.wrappers.vector.RecordEpisodeStatistics(
        gym.wrappers.vector.NormalizeObservation(env)
    )
    obs, _ = wrapped.reset(seed=3)
    assert obs.shape == (64, 8)
    finished = 0
    for _ in range(1500):
        obs, reward, terminated, truncated, info = wrapped.step(wrapped.action_space.sample())
        finished += int(info.get("_episode", np.zeros(1, bool)).sum())
    assert finished > 0  # whole games were played and counted through the auto-resets


@pytest.mark.parametrize("target", TARGETS)
def test_single_env_passes_gymnasiums_env_checker(target: str) -> None:
    env = envforge.make("pong", target=target, api="gymnasium")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any complaint of the checker fails the test
        warnings.filterwarnings("ignore", message=".*alternative render modes.*")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize(
    ("target", "mode"),
    [
        pytest.param("rust", AutoresetMode.NEXT_STEP, marks=needs_rust),
        pytest.param("rust", AutoresetMode.SAME_STEP, marks=needs_rust),
        ("jax", AutoresetMode.NEXT_STEP),  # one JAX case: each env compiles its own step
    ],
)
def test_vector_env_matches_gymnasiums_sync_vector_env(target: str, mode: AutoresetMode) -> None:
    """gymnasium's SyncVectorEnv over single envs is the reference for each autoreset mode; the
    batched env must give the same observations, rewards, flags and final observations, across
    many auto-resets (CartPole's episodes under random actions last ~20 steps)."""
    n = 3
    ours = envforge.make("cartpole", target=target, num_envs=n, autoreset_mode=mode)
    theirs = SyncVectorEnv(
        [lambda: envforge.make("cartpole", target=target, api="gymnasium")] * n,
        autoreset_mode=mode,
    )
    a, b = run_random(ours, 120, seed=7), run_random(theirs, 120, seed=7)
    np.testing.assert_array_equal(a[0], b[0])
    resets = 0
    for (oa, ra, ta, tra, ia), (ob, rb, tb, trb, ib) in zip(a[1:], b[1:], strict=True):
        check_obs(oa, ours.observation_space, "step")
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(tra, trb)
        assert set(ia) == set(ib)
        if "_final_obs" in ia:
            np.testing.assert_array_equal(ia["_final_obs"], ib["_final_obs"])
            for i in np.flatnonzero(ia["_final_obs"]):
                np.testing.assert_array_equal(ia["final_obs"][i], ib["final_obs"][i])
        resets += int((ta | tra).sum())
    assert resets > 10


@needs_rust
def test_first_episode_is_the_c_references_own() -> None:
    """reset(seed=s) starts env i from the port's reset(s + i): observations, rewards and flags
    of the first 150 steps are the C reference's, bit for bit (the Rust port in strict mode
    agrees with the strict C build exactly; a JAX port does only under strict XLA flags)."""
    spec = spec_for_name("pong")
    c = CDriver(spec, ROOT / "references/pong/pong.c", strict_float=True)
    env = envforge.make("pong", target="rust", num_envs=8)
    obs, _ = env.reset(seed=100)
    state = c.reset(np.arange(100, 108, dtype=np.uint32))
    np.testing.assert_array_equal(obs, c.observe(state))
    rng = np.random.default_rng(0)
    for _ in range(150):
        actions = rng.integers(0, 3, 8)
        obs, reward, terminated, truncated, _ = env.step(actions)
        tr = c.step(state, actions)
        np.testing.assert_array_equal(obs, tr.obs)
        np.testing.assert_array_equal(reward, tr.reward)
        np.testing.assert_array_equal(terminated, tr.terminated)
        np.testing.assert_array_equal(truncated, tr.truncated)
        state = tr.state


@pytest.mark.parametrize("target", TARGETS)
def test_vector_env_reset_mask_and_determinism(target: str) -> None:
    env = envforge.make("pong", target=target, num_envs=4)
    first, _ = env.reset(seed=1)
    for _ in range(5):
        moved, *_ = env.step(np.array([2, 2, 1, 1]))
    mask = np.array([True, False, True, False])
    obs, _ = env.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(obs[~mask], moved[~mask])  # untouched envs keep their state
    again, _ = env.reset(seed=1)
    np.testing.assert_array_equal(again, first)
    with pytest.raises(ValueError, match="actions of shape"):
        env.step(np.zeros(3, int))


def test_cap_truncates_a_port_that_does_not() -> None:
    """The spec's episode cap truncates non-terminal steps even when the port's flag is false."""
    from envforge.envs.episodes import Episodes

    episodes = Episodes(2, episode_cap=3)
    never = np.zeros(2, bool)
    flags = [episodes.count_step(np.array([False, True]), never) for _ in range(3)]
    np.testing.assert_array_equal(flags[1], [False, False])
    np.testing.assert_array_equal(flags[2], [True, False])  # the terminated env is not truncated


def test_gymnax_env_scans_1000_steps_under_jit_and_vmap() -> None:
    env = envforge.make("pong")
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)

    def rollout(key: jax.Array) -> tuple[jax.Array, ...]:
        obs, state = env.reset(key, params)

        def body(carry: tuple, k: jax.Array) -> tuple:
            obs, state = carry
            k_act, k_step = jax.random.split(k)
            obs, state, reward, done, info = env.step(
                k_step, state, act_space.sample(k_act), params
            )
            return (obs, state), (reward, done, obs_space.contains(obs), info["final_obs"])

        _, out = jax.lax.scan(body, (obs, state), jax.random.split(key, 1000))
        return out

    reward, done, inside, final_obs = jax.jit(jax.vmap(rollout))(
        jax.random.split(jax.random.key(0), 2)
    )
    assert reward.shape == (2, 1000) and bool(inside.all())
    assert int(done.sum()) >= 2  # random play loses a whole game within 1000 steps
    # the step that ends a game shows the opponent's 21st point in its final observation
    final_score = np.asarray(final_obs)[np.asarray(done)][:, 6] * 21
    np.testing.assert_allclose(final_score.max(), 21.0, rtol=1e-6)


def test_gymnax_env_is_the_ports_own_functions() -> None:
    """Reset from a key is the port's reset of a seed drawn from it; a step before any episode
    end is the port's step; an episode end auto-resets from the step key."""
    env = envforge.make("pong")
    port = env.module
    key = jax.random.key(5)
    obs, state = env.reset(key)
    np.testing.assert_array_equal(
        obs, port.observe(port.reset(jax.random.bits(key, (), jnp.uint32)))
    )
    obs2, state2, reward, done, info = env.step(jax.random.key(6), state, 2)
    expected = port.step(state.env, 2)
    np.testing.assert_array_equal(obs2, expected[1])
    assert float(reward) == float(expected[2]) and not bool(done)
    ended = state._replace(
        env=state.env._replace(
            score_l=jnp.int32(20), ball_x=jnp.float32(639.0), ball_vx=jnp.float32(8.0)
        )
    )
    obs3, state3, _, done3, info3 = env.step(jax.random.key(7), ended, 0, env.default_params)
    assert bool(done3) and bool(info3["terminated"])
    fresh = port.reset(jax.random.bits(jax.random.key(7), (), jnp.uint32))
    np.testing.assert_array_equal(obs3, port.observe(fresh))
    assert int(state3.length) == 0


def test_make_rejects_bad_arguments() -> None:
    with pytest.raises(BadInput, match="unsupported target 'cobol'"):
        envforge.make("pong", target="cobol")
    with pytest.raises(BadInput, match="no c port found for pong"):  # a target pong has no port of
        envforge.make("pong", target="c")
    with pytest.raises(BadInput, match="unknown env"):
        envforge.make("nosuchenv")
    with pytest.raises(BadInput, match="num_envs"):
        envforge.make("pong", target="jax", num_envs=0)
    with pytest.raises(BadInput, match="vmap"):
        envforge.make("pong", api="gymnax", num_envs=4)
