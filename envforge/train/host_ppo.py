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
from envforge.train.time_split import Laps
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

    def act(params: Any, norm: ObsNorm, obs: jax.Array, key: jax.Array) -> tuple[Any, ...]:
        x = net_input(norm, obs)
        head_out, value = net.apply(params, x)
        action = net.sample(key, params, head_out)
        log_prob = net.log_prob(params, head_out, action)
        return x, action, net.env_action(action), log_prob, value

    def value_of(params: Any, norm: ObsNorm, obs: jax.Array) -> jax.Array:
        return net.value(params, net_input(norm, obs))

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

    # One jitted call per batched step: the key split, the numpy observations grouped by seed
    # and the policy applied inside it (the eager JAX calls a step used to make around it cost
    # more than the acting). Step-time arrays are [K, E, ...]; the vector env's rows [K * E, ...].
    def grouped(x: jax.Array) -> jax.Array:
        return x.reshape(k, e, *x.shape[1:])

    @jax.jit
    def act_step(params: Any, norm: ObsNorm, obs: jax.Array, rng: jax.Array) -> tuple[Any, ...]:
        rng, sub = jax.random.split(rng)
        x, action, env_action, log_prob, value = jax.vmap(act)(
            params, norm, grouped(obs), jax.random.split(sub, k)
        )
        return rng, (x, action, log_prob, value), env_action.reshape(k * e, *env_action.shape[2:])

    @jax.jit
    def values_of(params: Any, norm: ObsNorm, obs: jax.Array) -> jax.Array:
        return jax.vmap(value_of)(params, norm, grouped(obs)).reshape(k * e)

    @jax.jit
    def norm_step(norm: ObsNorm, obs: jax.Array) -> ObsNorm:
        return jax.vmap(update_obs_norm)(norm, grouped(obs))

    # the rollout reaches the update as collected (a list of each step's device arrays, reward
    # and done in numpy buffers [T, K * E]) and is stacked inside it; trajectories are
    # [K, T, E, ...]: mapped over seeds, time-major inside
    @jax.jit
    def learn_all(
        learner: Learner,
        norm: ObsNorm,
        acted: list[tuple[jax.Array, ...]],
        buffers: tuple[jax.Array, jax.Array, jax.Array],
        rng: jax.Array,
    ) -> tuple[Learner, jax.Array]:
        reward, done, last_obs = buffers
        x, action, log_prob, value = (jnp.stack(a, axis=1) for a in zip(*acted, strict=True))
        by_seed = lambda b: b.reshape(b.shape[0], k, e).swapaxes(0, 1)  # noqa: E731
        traj = dict(obs=x, action=action, log_prob=log_prob, value=value)
        traj.update(reward=by_seed(reward), done=by_seed(done))
        last_value = jax.vmap(value_of)(learner.params, norm, grouped(last_obs))
        rng, sub = jax.random.split(rng)
        learner, _ = jax.vmap(learn)(learner, traj, last_value, jax.random.split(sub, k))
        return learner, rng

    rng = jax.random.PRNGKey(seed)
    rng, init_key = jax.random.split(rng)
    learner = jax.vmap(partial(init_learner, net, optimizer))(jax.random.split(init_key, k))
    norm = jax.vmap(lambda _: init_obs_norm(net.obs_dim))(jnp.arange(k))

    start = time.perf_counter()
    obs = vec.reset()
    if cfg.normalize_obs:
        norm = norm_step(norm, obs)
    # compile acting and bootstrapping up front (the update compiles on its first call, timed
    # apart) so the training time below is training only
    jax.block_until_ready(act_step(learner.params, norm, obs, rng))
    jax.block_until_ready(values_of(learner.params, norm, obs))
    jit_s = time.perf_counter() - start

    history = np.full((k, cfg.num_updates), np.nan)
    rewards = np.zeros((cfg.num_steps, k * e), np.float32)
    dones = np.zeros((cfg.num_steps, k * e), bool)
    train_start, cpu_start = time.perf_counter(), time.process_time()
    compile_learn_s = compile_learn_cpu = learn_s = learn_cpu = 0.0
    laps = Laps()  # env stepping, acting and learning, each lap charged to its phase
    for update in range(cfg.num_updates):
        acted: list[tuple[jax.Array, ...]] = []
        finished_sum = np.zeros(k)
        finished_n = np.zeros(k)
        for t in range(cfg.num_steps):
            rng, out, env_action = act_step(learner.params, norm, obs, rng)
            acted.append(out)
            actions = np.asarray(env_action)  # waits for the policy
            laps.lap("policy")
            step = vec.step(actions)
            laps.lap("env")
            rewards[t] = step.reward
            if cfg.bootstrap_truncation and step.truncated.any():
                final_value = np.asarray(values_of(learner.params, norm, step.final_obs))
                rewards[t] += cfg.gamma * final_value * step.truncated
            if cfg.normalize_obs:
                norm = norm_step(norm, step.obs)
            laps.lap("policy")
            dones[t] = done = step.done
            finished_sum += (step.episode_return * done).reshape(k, e).sum(axis=1)
            finished_n += done.reshape(k, e).sum(axis=1)
            obs = step.obs
            laps.lap("other")
        c0 = time.process_time()
        learner, rng = learn_all(learner, norm, acted, (rewards, dones, obs), rng)
        jax.block_until_ready(learner)
        if update == 0:  # the first call compiles the update
            compile_learn_s = laps.lap("compile")
            compile_learn_cpu = time.process_time() - c0
        else:
            learn_s += laps.lap("update")
            learn_cpu += time.process_time() - c0
        with np.errstate(invalid="ignore", divide="ignore"):
            history[:, update] = np.where(finished_n > 0, finished_sum / finished_n, np.nan)
        if progress is not None:
            done_steps = (update + 1) * cfg.batch_size * k
            elapsed = time.perf_counter() - train_start - compile_learn_s
            recent = float(np.nanmean(history[:, update])) if finished_n.any() else float("nan")
            progress(done_steps, cfg.steps_per_seed * k, done_steps / max(elapsed, 1e-9), recent)
        laps.lap("other")
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
    laps.split.updates = cfg.num_updates
    extra = {
        "split": laps.split,
        "learn_s": learn_s,
        "learn_s_per_update": learn_s / max(1, cfg.num_updates - 1),
        "learn_cpu_s_per_update": learn_cpu / max(1, cfg.num_updates - 1),
    }
    return TrainResult(
        policy, history, jit_s + compile_learn_s, train_s, cfg.steps_per_seed * k, cpu_s, extra
    )
