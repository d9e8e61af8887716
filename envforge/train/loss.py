"""The PPO objective and the epoch/minibatch update over one rollout batch (pure, jit-able).

Shared by the fused trainer (inside its ``lax.scan``) and the host-loop trainer (jitted alone),
so both optimise exactly the same thing with the same hyperparameters.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from envforge.train.config import PPOConfig
from envforge.train.networks import ActorCritic, Params


class Batch(NamedTuple):
    """Flat training batch ``[B, ...]``; ``obs`` is what the network saw (normalized if enabled)."""

    obs: jax.Array
    actions: jax.Array
    log_probs: jax.Array
    values: jax.Array
    advantages: jax.Array
    returns: jax.Array


class Learner(NamedTuple):
    params: Params
    opt_state: Any


class LossInfo(NamedTuple):
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array


def make_optimizer(cfg: PPOConfig) -> optax.GradientTransformation:
    """Adam with global-norm clipping; the step size decays to 0 over all gradient steps."""
    steps = cfg.num_updates * cfg.update_epochs * cfg.num_minibatches
    lr = (
        optax.linear_schedule(cfg.learning_rate, 0.0, steps) if cfg.anneal_lr else cfg.learning_rate
    )
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(lr, eps=1e-5))


def init_learner(
    net: ActorCritic, optimizer: optax.GradientTransformation, key: jax.Array
) -> Learner:
    params = net.init(key)
    return Learner(params, optimizer.init(params))


def ppo_loss(
    net: ActorCritic, cfg: PPOConfig, params: Params, mb: Batch
) -> tuple[jax.Array, LossInfo]:
    """Clipped surrogate + (optionally clipped) value loss - entropy bonus, on one minibatch."""
    head_out, value = net.apply(params, mb.obs)
    log_prob = net.log_prob(params, head_out, mb.actions)
    log_ratio = log_prob - mb.log_probs
    ratio = jnp.exp(log_ratio)

    adv = mb.advantages
    if cfg.normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    surrogate = jnp.minimum(
        ratio * adv, jnp.clip(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef) * adv
    )
    policy_loss = -surrogate.mean()

    value_error = (value - mb.returns) ** 2
    if cfg.clip_value_loss:
        clipped = mb.values + jnp.clip(value - mb.values, -cfg.clip_coef, cfg.clip_coef)
        value_error = jnp.maximum(value_error, (clipped - mb.returns) ** 2)
    value_loss = 0.5 * value_error.mean()

    entropy = net.entropy(params, head_out).mean()
    loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
    info = LossInfo(
        policy_loss=policy_loss,
        value_loss=value_loss,
        entropy=entropy,
        approx_kl=((ratio - 1) - log_ratio).mean(),
        clip_fraction=(jnp.abs(ratio - 1) > cfg.clip_coef).mean(),
    )
    return loss, info


def ppo_update(
    net: ActorCritic,
    cfg: PPOConfig,
    optimizer: optax.GradientTransformation,
    learner: Learner,
    batch: Batch,
    key: jax.Array,
) -> tuple[Learner, LossInfo]:
    """``update_epochs`` shuffled passes of ``num_minibatches`` gradient steps over ``batch``."""
    grad_fn = jax.value_and_grad(lambda p, mb: ppo_loss(net, cfg, p, mb), has_aux=True)

    def minibatch_step(learner: Learner, mb: Batch) -> tuple[Learner, LossInfo]:
        (_, info), grads = grad_fn(learner.params, mb)
        updates, opt_state = optimizer.update(grads, learner.opt_state, learner.params)
        return Learner(optax.apply_updates(learner.params, updates), opt_state), info

    def epoch(
        carry: tuple[Learner, jax.Array], _: None
    ) -> tuple[tuple[Learner, jax.Array], LossInfo]:
        learner, key = carry
        key, sub = jax.random.split(key)
        order = jax.random.permutation(sub, cfg.batch_size)
        minibatches = jax.tree_util.tree_map(
            lambda x: x[order].reshape(cfg.num_minibatches, cfg.minibatch_size, *x.shape[1:]), batch
        )
        learner, infos = jax.lax.scan(minibatch_step, learner, minibatches)
        return (learner, key), infos

    (learner, _), infos = jax.lax.scan(epoch, (learner, key), None, cfg.update_epochs)
    return learner, jax.tree_util.tree_map(jnp.mean, infos)
