"""PPO in PureJaxRL's style on the gymnax API of a JAX port: CartPole by default.

    python examples/purejaxrl_gymnax.py --total-timesteps 500000

``envforge.make("cartpole")`` is a gymnax-style env (``reset(key, params)``, ``step(key, state,
action, params)``, spaces, ``default_params``) that auto-resets inside ``step``. The whole
training run (rollouts, GAE, epochs of minibatch updates) is one jitted function of nested
``lax.scan``s, vmapped over envs.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import envforge


@dataclass(frozen=True)
class Config:
    env: str = "cartpole"
    num_envs: int = 8
    num_steps: int = 128
    total_timesteps: int = 500_000
    update_epochs: int = 4
    num_minibatches: int = 4
    learning_rate: float = 2.5e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    seed: int = 0


def init_network(key: jax.Array, obs_dim: int, n_actions: int, hidden: int) -> dict[str, Any]:
    sizes = {"actor": (obs_dim, hidden, hidden, n_actions), "critic": (obs_dim, hidden, hidden, 1)}
    params: dict[str, Any] = {}
    for name, dims in sizes.items():
        layers = []
        for i, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            key, k = jax.random.split(key)
            scale = 0.01 if (name == "actor" and i == 2) else (1.0 if i == 2 else np.sqrt(2))
            layers.append(
                {
                    "w": jax.nn.initializers.orthogonal(scale)(k, (n_in, n_out)),
                    "b": jnp.zeros(n_out),
                }
            )
        params[name] = layers
    return params


def apply_network(params: dict[str, Any], obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    def mlp(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
        for layer in layers[:-1]:
            x = jnp.tanh(x @ layer["w"] + layer["b"])
        return x @ layers[-1]["w"] + layers[-1]["b"]

    return mlp(params["actor"], obs), mlp(params["critic"], obs)[..., 0]


def make_train(config: Config) -> Any:
    env = envforge.make(config.env)
    env_params = env.default_params
    num_updates = max(1, config.total_timesteps // (config.num_envs * config.num_steps))
    minibatch = config.num_envs * config.num_steps // config.num_minibatches
    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(config.learning_rate, eps=1e-5),
    )
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def train(key: jax.Array) -> dict[str, jax.Array]:
        key, k_net, k_env = jax.random.split(key, 3)
        obs_dim = int(np.prod(env.observation_space(env_params).shape))
        params = init_network(k_net, obs_dim, env.num_actions, config.hidden)
        opt_state = optimizer.init(params)
        obs, env_state = reset(jax.random.split(k_env, config.num_envs), env_params)

        # ---- collect a rollout --------------------------------------------------------
        def env_step(carry: tuple, _: None) -> tuple:
            params, env_state, obs, key = carry
            key, k_act, k_step = jax.random.split(key, 3)
            logits, value = apply_network(params, obs)
            action = jax.random.categorical(k_act, logits)
            logp = jax.nn.log_softmax(logits)[jnp.arange(config.num_envs), action]
            next_obs, env_state, reward, done, info = step(
                jax.random.split(k_step, config.num_envs), env_state, action, env_params
            )
            transition = (obs, action, logp, value, reward, done, info)
            return (params, env_state, next_obs, key), transition

        # ---- GAE, backwards over the rollout ------------------------------------------
        def gae(values: jax.Array, rewards: jax.Array, dones: jax.Array, last: jax.Array):
            def back(carry: tuple, x: tuple) -> tuple:
                adv, next_value = carry
                value, reward, done = x
                delta = reward + config.gamma * next_value * (1 - done) - value
                adv = delta + config.gamma * config.gae_lambda * (1 - done) * adv
                return (adv, value), adv

            _, advs = jax.lax.scan(
                back, (jnp.zeros_like(last), last), (values, rewards, dones), reverse=True
            )
            return advs, advs + values

        # ---- one PPO update: epochs of minibatches ------------------------------------
        def loss_fn(params: dict[str, Any], batch: tuple) -> jax.Array:
            obs, action, old_logp, adv, target = batch
            logits, value = apply_network(params, obs)
            logp_all = jax.nn.log_softmax(logits)
            logp = jnp.take_along_axis(logp_all, action[:, None], axis=1)[:, 0]
            ratio = jnp.exp(logp - old_logp)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            clipped = jnp.clip(ratio, 1 - config.clip_eps, 1 + config.clip_eps)
            actor = -jnp.minimum(ratio * adv, clipped * adv).mean()
            critic = 0.5 * ((value - target) ** 2).mean()
            entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
            return actor + config.vf_coef * critic - config.ent_coef * entropy

        def update_step(carry: tuple, _: None) -> tuple:
            params, opt_state, env_state, obs, key = carry
            (params, env_state, obs, key), traj = jax.lax.scan(
                env_step, (params, env_state, obs, key), None, config.num_steps
            )
            t_obs, t_action, t_logp, t_value, t_reward, t_done, t_info = traj
            _, last_value = apply_network(params, obs)
            advs, targets = gae(t_value, t_reward, t_done.astype(jnp.float32), last_value)
            data = (t_obs, t_action, t_logp, advs, targets)
            flat = jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[2:]), data)

            def epoch(carry: tuple, k: jax.Array) -> tuple:
                perm = jax.random.permutation(k, config.num_envs * config.num_steps)
                batches = jax.tree_util.tree_map(
                    lambda x: x[perm].reshape(config.num_minibatches, minibatch, *x.shape[1:]),
                    flat,
                )

                def minibatch_step(carry: tuple, batch: tuple) -> tuple:
                    params, opt_state = carry
                    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
                    updates, opt_state = optimizer.update(grads, opt_state, params)
                    return (optax.apply_updates(params, updates), opt_state), loss

                return jax.lax.scan(minibatch_step, carry, batches)

            key, k_epochs = jax.random.split(key)
            (params, opt_state), losses = jax.lax.scan(
                epoch, (params, opt_state), jax.random.split(k_epochs, config.update_epochs)
            )
            ended = t_done.sum()
            metrics = {
                "loss": losses.mean(),
                "episodes": ended,
                "mean_return": (t_info["episode_return"] * t_done).sum() / jnp.maximum(ended, 1),
            }
            return (params, opt_state, env_state, obs, key), metrics

        _, metrics = jax.lax.scan(
            update_step, (params, opt_state, env_state, obs, key), None, num_updates
        )
        return metrics

    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in fields(Config):
        parser.add_argument(
            "--" + f.name.replace("_", "-"), type=type(f.default), default=f.default
        )
    config = Config(**vars(parser.parse_args()))
    start = time.perf_counter()
    metrics = jax.block_until_ready(jax.jit(make_train(config))(jax.random.key(config.seed)))
    seconds = time.perf_counter() - start
    returns, ended = np.asarray(metrics["mean_return"]), np.asarray(metrics["episodes"])
    for i in range(0, len(returns), max(1, len(returns) // 10)):
        shown = f"{returns[i]:.1f}" if ended[i] else "- (no episode ended)"
        print(f"update {i + 1}: mean return of the episodes that ended {shown}")
    print(f"{len(returns)} updates in {seconds:.1f} s including compilation")


if __name__ == "__main__":
    main()
