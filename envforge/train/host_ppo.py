"""PPO as a plain Python loop over a host vector env: the slow, obvious counterpart of ppo.py.

It trains where the fused trainer cannot (a C, gymnasium or Rust implementation behind a Driver,
for ``--both-directions``) and is the baseline of ``benchmarks/train_throughput.py``. Only the
env stepping is on the host: acting, GAE and the update are the same jitted JAX functions the
fused trainer uses (``loss.py``, ``gae.py``), with the same hyperparameters. K seeds train side
by side: rows ``k * num_envs ... (k + 1) * num_envs - 1`` of the vector env belong to seed k.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envforge.spec import EnvSpec
from envforge.train.config import PPOConfig
from envforge.train.gae import compute_gae
from envforge.train.loss import Batch, Learner, init_learner, make_optimizer, ppo_update
from envforge.train.obs_norm import ObsNorm, init_obs_norm, normalize_obs, update_obs_norm
from envforge.train.policy import Policy
from envforge.train.ppo import ProgressFn, TrainResult, network_for
from envforge.train.vec_env import VecEnv


def train_host(
    vec: VecEnv,
    spec: EnvSpec,
    cfg: PPOConfig,
    seeds: int = 1,
    seed: int = 0,
    progress: ProgressFn | None = None,
) -> TrainResult:
    """Train ``seeds`` policies on ``vec`` (which must have ``seeds * cfg.num_envs`` rows)."""
    if vec.num_envs != seeds * cfg.num_envs:
        raise ValueError(f"vector env has {vec.num_envs} rows, expected {seeds} x {cfg.num_envs}")
    net = network_for(spec, cfg)
    optimizer = make_optimizer(cfg)
    k, e = seeds, cfg.num_envs

    def net_input(norm: ObsNorm, obs: jax.Array) -> jax.Array:
        flat = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        return normalize_obs(norm, flat) if cfg.normalize_obs else flat

    def act(learner: Learner, norm: ObsNorm, obs: jax.Array, key: jax.Array) -> tuple[Any, ...]:
        x = net_input(norm, obs)
        head_out, value = net.apply(learner.params, x)
        action = net.sample(key, learner.params, head_out)
        log_prob = net.log_prob(learner.params, head_out, action)
        return x, action, net.env_action(action), log_prob, value

    def value_of(learner: Learner, norm: ObsNorm, obs: jax.Array) -> jax.Array:
        return net.value(learner.params, net_input(norm, obs))

    def learn(
        learner: Learner, traj: dict[str, jax.Array], last_value: jax.Array, key: jax.Array
    ) -> tuple[Learner, Any]:
        adv, targets = compute_gae(
            traj["reward"], traj["value"], traj["done"], last_value, cfg.gamma, cfg.gae_lambda
        )
        flat = lambda x: x.reshape(cfg.batch_size, *x.shape[2:])  # noqa: E731
        batch = Batch(
            flat(traj["obs"]),
            flat(traj["action"]),
            flat(traj["log_prob"]),
            flat(traj["value"]),
            flat(adv),
            flat(targets),
        )
        return ppo_update(net, cfg, optimizer, learner, batch, key)

    # every function maps over seeds; the step-time arrays are [K, E, ...]
    act_k = jax.jit(jax.vmap(act))
    value_k = jax.jit(jax.vmap(value_of))
    # trajectories are [K, T, E, ...]: map over seeds, time-major inside
    learn_k = jax.jit(jax.vmap(learn))
    norm_k = jax.jit(jax.vmap(lambda n, o: update_obs_norm(n, o)))

    rng = jax.random.PRNGKey(seed)
    rng, init_key = jax.random.split(rng)
    learner = jax.vmap(partial(init_learner, net, optimizer))(jax.random.split(init_key, k))
    norm = jax.vmap(lambda _: init_obs_norm(net.obs_dim))(jnp.arange(k))

    def grouped(x: np.ndarray) -> jax.Array:
        return jnp.asarray(x).reshape(k, e, *x.shape[1:])

    start = time.perf_counter()
    obs = vec.reset()
    if cfg.normalize_obs:
        norm = norm_k(norm, grouped(obs))
    # compile acting and bootstrapping up front (the update compiles on its first call, timed
    # apart) so the training time below is training only
    jax.block_until_ready(act_k(learner, norm, grouped(obs), jax.random.split(rng, k)))
    jax.block_until_ready(value_k(learner, norm, grouped(obs)))
    jit_s = time.perf_counter() - start

    history = np.full((k, cfg.num_updates), np.nan)
    train_start, cpu_start = time.perf_counter(), time.process_time()
    compile_learn_s = compile_learn_cpu = learn_s = learn_cpu = 0.0
    for update in range(cfg.num_updates):
        steps: dict[str, list[Any]] = {
            n: [] for n in ("obs", "action", "log_prob", "value", "reward", "done")
        }
        finished_sum = np.zeros(k)
        finished_n = np.zeros(k)
        for _ in range(cfg.num_steps):
            rng, sub = jax.random.split(rng)
            x, action, env_action, log_prob, value = act_k(
                learner, norm, grouped(obs), jax.random.split(sub, k)
            )
            step = vec.step(np.asarray(env_action).reshape(k * e, *env_action.shape[2:]))
            reward = step.reward.astype(np.float32)
            if cfg.bootstrap_truncation and step.truncated.any():
                final_value = np.asarray(value_k(learner, norm, grouped(step.final_obs))).reshape(
                    -1
                )
                reward = reward + cfg.gamma * final_value * step.truncated
            if cfg.normalize_obs:
                norm = norm_k(norm, grouped(step.obs))
            done = step.done
            finished_sum += (step.episode_return * done).reshape(k, e).sum(axis=1)
            finished_n += done.reshape(k, e).sum(axis=1)
            for name, v in (
                ("obs", x),
                ("action", action),
                ("log_prob", log_prob),
                ("value", value),
                ("reward", grouped(reward)),
                ("done", grouped(done)),
            ):
                steps[name].append(v)
            obs = step.obs
        traj = {n: jnp.stack(v, axis=1) for n, v in steps.items()}
        last_value = value_k(learner, norm, grouped(obs))
        rng, sub = jax.random.split(rng)
        t0, c0 = time.perf_counter(), time.process_time()
        learner, _ = learn_k(learner, traj, last_value, jax.random.split(sub, k))
        jax.block_until_ready(learner)
        if update == 0:  # the first call compiles the update
            compile_learn_s, compile_learn_cpu = time.perf_counter() - t0, time.process_time() - c0
        else:
            learn_s += time.perf_counter() - t0
            learn_cpu += time.process_time() - c0
        with np.errstate(invalid="ignore", divide="ignore"):
            history[:, update] = np.where(finished_n > 0, finished_sum / finished_n, np.nan)
        if progress is not None:
            done_steps = (update + 1) * cfg.batch_size * k
            elapsed = time.perf_counter() - train_start - compile_learn_s
            recent = float(np.nanmean(history[:, update])) if finished_n.any() else float("nan")
            progress(done_steps, cfg.steps_per_seed * k, done_steps / max(elapsed, 1e-9), recent)
    train_s = time.perf_counter() - train_start - compile_learn_s
    cpu_s = time.process_time() - cpu_start - compile_learn_cpu

    policy_norm = norm if cfg.normalize_obs else None
    meta = {
        "env": spec.name,
        "seeds": k,
        "seed": seed,
        "total_timesteps": cfg.total_timesteps,
        "trainer": "host",
    }
    policy = Policy(net, learner.params, policy_norm, meta)
    # the first update's learning time is compile time; count the rest as learning
    extra = {
        "learn_s": learn_s,
        "learn_s_per_update": learn_s / max(1, cfg.num_updates - 1),
        "learn_cpu_s_per_update": learn_cpu / max(1, cfg.num_updates - 1),
    }
    return TrainResult(
        policy, history, jit_s + compile_learn_s, train_s, cfg.steps_per_seed * k, cpu_s, extra
    )
