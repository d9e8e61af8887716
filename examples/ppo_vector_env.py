"""PPO in CleanRL's style on a gymnasium vector env of a port: the Rust pong port by default.

    python examples/ppo_vector_env.py --total-timesteps 400000

The envs step on the host (``envforge.make(..., num_envs=N)``, a ``gymnasium.vector.VectorEnv``);
the policy and the update are JAX + optax, jitted. The vector env auto-resets in gymnasium 1.x's
NEXT_STEP mode: the step after an episode ends only resets that env (its action is ignored, reward
0), so that transition is masked out of the loss, and the observation it was taken from (the
ended episode's last one) gives the value to bootstrap a truncated episode from.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax

import envforge


@dataclass
class Args:
    env: str = "pong"
    """env name (references/<env>) or a port path"""
    target: str = "rust"
    """which port of the env: rust or jax"""
    num_envs: int = 16
    num_steps: int = 128
    """steps per env per rollout"""
    total_timesteps: int = 400_000
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    seed: int = 1


def init_params(key: jax.Array, obs_dim: int, n_actions: int, hidden: int) -> dict[str, Any]:
    def dense(k: jax.Array, n_in: int, n_out: int, scale: float) -> dict[str, jax.Array]:
        w = jax.nn.initializers.orthogonal(scale)(k, (n_in, n_out))
        return {"w": w, "b": jnp.zeros(n_out)}

    k = jax.random.split(key, 6)
    root2 = float(np.sqrt(2))
    return {
        "actor": [dense(k[0], obs_dim, hidden, root2), dense(k[1], hidden, hidden, root2)]
        + [dense(k[2], hidden, n_actions, 0.01)],
        "critic": [dense(k[3], obs_dim, hidden, root2), dense(k[4], hidden, hidden, root2)]
        + [dense(k[5], hidden, 1, 1.0)],
    }


def mlp(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def forward(params: dict[str, Any], obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    return mlp(params["actor"], obs), mlp(params["critic"], obs)[..., 0]


@jax.jit
def act(params: dict[str, Any], obs: jax.Array, key: jax.Array) -> tuple[jax.Array, ...]:
    key, k_act = jax.random.split(key)
    logits, value = forward(params, obs)
    action = jax.random.categorical(k_act, logits)
    logp = jax.nn.log_softmax(logits)[jnp.arange(len(action)), action]
    return key, action, logp, value


def advantages(args: Args, batch: dict[str, np.ndarray], next_value: np.ndarray) -> np.ndarray:
    """GAE over the rollout; the chain is cut where an episode ended, and only a terminated
    step gives up the next value (a truncated one bootstraps from its last observation)."""
    values = np.concatenate([batch["values"], next_value[None]])
    adv = np.zeros_like(batch["rewards"])
    last = np.zeros_like(next_value)
    for t in reversed(range(args.num_steps)):
        delta = (
            batch["rewards"][t]
            + args.gamma * values[t + 1] * (1.0 - batch["terminated"][t])
            - values[t]
        )
        last = delta + args.gamma * args.gae_lambda * (1.0 - batch["done"][t]) * last
        adv[t] = last
    return adv


def make_update(args: Args, optimizer: optax.GradientTransformation) -> Any:
    def loss_fn(params: dict[str, Any], mb: dict[str, jax.Array]) -> tuple[jax.Array, Any]:
        logits, value = forward(params, mb["obs"])
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, mb["actions"][:, None], axis=1)[:, 0]
        ratio = jnp.exp(logp - mb["logp"])
        adv = mb["adv"]
        w = mb["valid"] / jnp.maximum(mb["valid"].sum(), 1.0)
        adv = (adv - (adv * w).sum()) / (jnp.sqrt((w * (adv - (adv * w).sum()) ** 2).sum()) + 1e-8)
        clipped = jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
        pg = (jnp.maximum(-adv * ratio, -adv * clipped) * w).sum()
        v = (0.5 * (value - mb["returns"]) ** 2 * w).sum()
        entropy = (-(jnp.exp(logp_all) * logp_all).sum(-1) * w).sum()
        return pg + args.vf_coef * v - args.ent_coef * entropy, (pg, v, entropy)

    @jax.jit
    def update(params: Any, opt_state: Any, data: dict[str, jax.Array], key: jax.Array) -> Any:
        size = data["obs"].shape[0]
        mb_size = size // args.num_minibatches

        def epoch(carry: tuple, k: jax.Array) -> tuple:
            perm = jax.random.permutation(k, size)[: mb_size * args.num_minibatches]
            shuffled = jax.tree_util.tree_map(
                lambda x: x[perm].reshape(args.num_minibatches, mb_size, *x.shape[1:]), data
            )

            def minibatch(carry: tuple, mb: dict[str, jax.Array]) -> tuple:
                params, opt_state = carry
                (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, mb)
                updates, opt_state = optimizer.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), (loss, *aux)

            return jax.lax.scan(minibatch, carry, shuffled)

        (params, opt_state), losses = jax.lax.scan(
            epoch, (params, opt_state), jax.random.split(key, args.update_epochs)
        )
        return params, opt_state, jax.tree_util.tree_map(lambda x: x[-1, -1], losses)

    return update


def train(args: Args) -> dict[str, Any]:
    envs = gym.wrappers.vector.RecordEpisodeStatistics(
        envforge.make(args.env, target=args.target, num_envs=args.num_envs)
    )
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    key = jax.random.key(args.seed)
    key, k_init = jax.random.split(key)
    params = init_params(k_init, obs_dim, int(envs.single_action_space.n), args.hidden)
    optimizer = optax.chain(
        optax.clip_by_global_norm(args.max_grad_norm),
        optax.adam(args.learning_rate, eps=1e-5),
    )
    opt_state = optimizer.init(params)
    update = make_update(args, optimizer)

    n, steps = args.num_envs, args.num_steps
    obs, _ = envs.reset(seed=args.seed)
    ended = np.zeros(n, bool)  # episodes that ended last step: this step only resets them
    returns: list[float] = []
    log: list[dict[str, float]] = []
    start = time.perf_counter()
    for _ in range(max(1, args.total_timesteps // (n * steps))):
        batch = {
            "obs": np.zeros((steps, n, obs_dim), np.float32),
            "actions": np.zeros((steps, n), np.int32),
            "logp": np.zeros((steps, n), np.float32),
            "values": np.zeros((steps, n), np.float32),
            "rewards": np.zeros((steps, n), np.float32),
            "terminated": np.zeros((steps, n), np.float32),
            "done": np.zeros((steps, n), np.float32),
            "valid": np.zeros((steps, n), np.float32),
        }
        for t in range(steps):
            key, *out = act(params, obs, key)
            action, logp, value = (np.asarray(x) for x in out)
            batch["obs"][t], batch["actions"][t] = obs, action
            batch["logp"][t], batch["values"][t] = logp, value
            batch["valid"][t] = ~ended
            obs, reward, terminated, truncated, info = envs.step(action)
            batch["rewards"][t], batch["terminated"][t] = reward, terminated
            ended = terminated | truncated
            batch["done"][t] = ended
            if "episode" in info:
                returns.extend(info["episode"]["r"][info["_episode"]].tolist())
        next_value = np.asarray(forward(params, jnp.asarray(obs))[1])
        adv = advantages(args, batch, next_value)
        data = {k: jnp.asarray(v.reshape(steps * n, *v.shape[2:])) for k, v in batch.items()}
        data["adv"] = jnp.asarray(adv.reshape(-1))
        data["returns"] = data["adv"] + data["values"]
        key, k_update = jax.random.split(key)
        params, opt_state, (loss, pg, v, entropy) = update(params, opt_state, data, k_update)
        recent = returns[-20:]
        log.append(
            {
                "loss": float(loss),
                "entropy": float(entropy),
                "mean_return": float(np.mean(recent)) if recent else float("nan"),
            }
        )
    envs.close()
    return {
        "updates": log,
        "episodes": len(returns),
        "returns": returns,
        "steps_per_second": len(log) * n * steps / (time.perf_counter() - start),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        parser.add_argument(flag, type=type(f.default), default=f.default)
    result = train(Args(**vars(parser.parse_args())))
    for i, row in enumerate(result["updates"]):
        print(f"update {i + 1}: mean return (last 20 episodes) {row['mean_return']:.2f}")
    print(f"{result['episodes']} episodes, {result['steps_per_second']:.0f} steps/s")


if __name__ == "__main__":
    main()
