"""Actor-critic MLPs and their action distributions, in plain JAX (parameters are a dict pytree).

Two separate MLPs, orthogonal initialisation (gain sqrt(2) in hidden layers, 0.01 on the policy
head, 1 on the value head). Discrete actions use a categorical over logits; continuous actions a
diagonal Gaussian with a state-independent log standard deviation, clipped to the action bounds
only when handed to the environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from envforge.spec.tables import ActionSpace

Params = dict[str, Any]


@dataclass(frozen=True)
class ActionHead:
    """What the policy outputs: ``n`` logits, or a Gaussian over ``shape`` clipped to [low, high]."""

    kind: Literal["discrete", "continuous"]
    n: int = 0
    shape: tuple[int, ...] = ()
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @classmethod
    def from_space(cls, space: ActionSpace) -> ActionHead:
        if space.type == "discrete":
            assert space.n is not None
            return cls(kind="discrete", n=space.n)
        low, high = space.bounds()
        return cls(
            kind="continuous",
            shape=tuple(space.shape),
            low=tuple(float(v) for v in low.ravel()),
            high=tuple(float(v) for v in high.ravel()),
        )

    @property
    def size(self) -> int:
        """Width of the policy head: logits, or Gaussian means."""
        return self.n if self.kind == "discrete" else max(1, math.prod(self.shape))


def orthogonal(key: jax.Array, n_in: int, n_out: int, gain: float) -> jax.Array:
    """``gain`` times a uniformly (Haar) distributed ``[n_in, n_out]`` matrix with orthonormal
    columns (``n_in >= n_out``) or rows: the distribution of ``jax.nn.initializers.orthogonal``,
    from the same Gaussian draw, but orthonormalized by Gram-Schmidt (each column projected out
    twice, which keeps float32 columns orthogonal to rounding) in plain matmuls.

    Why not ``jnp.linalg.qr``: under ``vmap`` (one network per seed) it becomes a batched LAPACK
    call that splits the batch over XLA:CPU's intra-op thread pool and blocks until the pieces
    are done. Two such calls running at once on a 2-thread pool each hold a thread and wait for
    the other's pieces: the fused trainer's init hung forever (seen in gdb: both pool threads
    in ``ParallelBatchMap`` under ``lapack_sgeqrf_ffi``). Gram-Schmidt gives R a positive
    diagonal, the sign convention the QR-based initializer imposes, so the matrices agree with
    it to float32 rounding."""
    tall, wide = max(n_in, n_out), min(n_in, n_out)
    z = jax.random.normal(key, (tall, wide), jnp.float32)

    def orthonormalize(j: jax.Array, q: jax.Array) -> jax.Array:
        v = jax.lax.dynamic_index_in_dim(z, j, axis=1, keepdims=False)
        for _ in range(2):  # columns j.. of q are still zero: only earlier ones are projected out
            v = v - q @ (q.T @ v)
        return jax.lax.dynamic_update_index_in_dim(q, v / jnp.sqrt(v @ v), j, axis=1)

    q = jax.lax.fori_loop(0, wide, orthonormalize, jnp.zeros((tall, wide), jnp.float32))
    return jnp.float32(gain) * (q if n_in >= n_out else q.T)


def _init_dense(key: jax.Array, n_in: int, n_out: int, gain: float) -> Params:
    w = orthogonal(key, n_in, n_out, gain)
    return {"w": w, "b": jnp.zeros((n_out,), jnp.float32)}


def _init_mlp(key: jax.Array, sizes: list[int], head_gain: float) -> list[Params]:
    keys = jax.random.split(key, len(sizes) - 1)
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        gain = head_gain if i == len(sizes) - 2 else math.sqrt(2.0)
        layers.append(_init_dense(keys[i], n_in, n_out, gain))
    return layers


@dataclass(frozen=True)
class ActorCritic:
    """A policy and a value network over flat observations (static, hashable: safe to close over)."""

    obs_dim: int
    head: ActionHead
    hidden: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    one_hot: int = 0
    """When > 0, the observation is one number, a discrete index (FrozenLake's cell), and the
    networks see it one-hot encoded in this many inputs instead."""

    @property
    def in_dim(self) -> int:
        return self.one_hot or self.obs_dim

    def inputs(self, obs: jax.Array) -> jax.Array:
        """The networks' input ``[..., in_dim]`` for observations ``[..., obs_dim]``."""
        x = obs.reshape(*obs.shape[: obs.ndim - 1], self.obs_dim)
        if self.one_hot:
            return jax.nn.one_hot(x[..., 0].astype(jnp.int32), self.one_hot, dtype=jnp.float32)
        return x.astype(jnp.float32)

    def init(self, key: jax.Array) -> Params:
        actor_key, critic_key = jax.random.split(key)
        params: Params = {
            "actor": _init_mlp(actor_key, [self.in_dim, *self.hidden, self.head.size], 0.01),
            "critic": _init_mlp(critic_key, [self.in_dim, *self.hidden, 1], 1.0),
        }
        if self.head.kind == "continuous":
            params["log_std"] = jnp.zeros((self.head.size,), jnp.float32)
        return params

    def _mlp(self, layers: list[Params], x: jax.Array) -> jax.Array:
        act = jnp.tanh if self.activation == "tanh" else jax.nn.relu
        for layer in layers[:-1]:
            x = act(x @ layer["w"] + layer["b"])
        last = layers[-1]
        return x @ last["w"] + last["b"]

    def apply(self, params: Params, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(policy head output ``[..., size]``, value ``[...]``) for observations ``[..., obs_dim]``."""
        x = self.inputs(obs)
        return self._mlp(params["actor"], x), self._mlp(params["critic"], x)[..., 0]

    def value(self, params: Params, obs: jax.Array) -> jax.Array:
        return self._mlp(params["critic"], self.inputs(obs))[..., 0]

    # ---- the action distribution ----------------------------------------------------------
    def sample(self, key: jax.Array, params: Params, head_out: jax.Array) -> jax.Array:
        if self.head.kind == "discrete":
            return jax.random.categorical(key, head_out).astype(jnp.int32)
        std = jnp.exp(params["log_std"])
        return head_out + std * jax.random.normal(key, head_out.shape)

    def mode(self, head_out: jax.Array) -> jax.Array:
        """The most likely action (greedy evaluation)."""
        if self.head.kind == "discrete":
            return jnp.argmax(head_out, axis=-1).astype(jnp.int32)
        return head_out

    def log_prob(self, params: Params, head_out: jax.Array, action: jax.Array) -> jax.Array:
        if self.head.kind == "discrete":
            logp = jax.nn.log_softmax(head_out)
            return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]
        log_std = params["log_std"]
        z = (action - head_out) / jnp.exp(log_std)
        per_dim = -0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)
        return per_dim.sum(axis=-1)

    def entropy(self, params: Params, head_out: jax.Array) -> jax.Array:
        if self.head.kind == "discrete":
            logp = jax.nn.log_softmax(head_out)
            return -(jnp.exp(logp) * logp).sum(axis=-1)
        per_dim = 0.5 + 0.5 * math.log(2 * math.pi) + params["log_std"]
        return jnp.broadcast_to(per_dim.sum(), head_out.shape[:-1])

    def env_action(self, action: jax.Array) -> jax.Array:
        """The action as the environment takes it: an int, or clipped and reshaped to the space."""
        if self.head.kind == "discrete":
            return action
        low = np.asarray(self.head.low, np.float32)
        high = np.asarray(self.head.high, np.float32)
        clipped = jnp.clip(action, low, high)
        return clipped.reshape(*action.shape[:-1], *self.head.shape)
