"""Return spread of two scripted policies on the battle JAX port, for L4's margin.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/battle_policy_returns.py [N]

Plays N battles (seeds 10,000 ..) with a uniform random legal action and with the strongest move
by power x effectiveness (the env.toml's `strongest` policy, falling back to the first legal
action), each as one jitted `vmap` over a 200-step `lax.scan` of the port's `reset`/`step`,
and prints each policy's mean return, its spread and the returns' histogram
(references/battle/README.md, "L4").
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "generated" / "battle" / "jax"))
import battle as B  # noqa: E402


def strongest(obs: jax.Array, key: jax.Array) -> jax.Array:
    scores = jnp.stack([obs[32 + i] * obs[36 + i] * obs[42 + i] for i in range(4)])
    best = jnp.argmax(scores)
    legal = obs[42:48] > 0
    return jnp.where(legal[best] & (scores[best] > 0), best, jnp.argmax(legal))


def uniform(obs: jax.Array, key: jax.Array) -> jax.Array:
    legal = obs[42:48] > 0
    return jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))


def play(policy, seeds: jax.Array, key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    def one(seed: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        state = B.reset(seed)

        def body(carry, k):
            state, obs, ret, done, length = carry
            state, obs2, r, term, trunc = B.step(state, policy(obs, k))
            ret = ret + jnp.where(done, 0.0, r)
            length = length + jnp.where(done, 0, 1)
            return (state, obs2, ret, done | term | trunc, length), None

        init = (state, B.observe(state), 0.0, False, 0)
        (_, _, ret, _, length), _ = jax.lax.scan(body, init, jax.random.split(key, B.TURN_CAP))
        return ret, length

    ret, length = jax.jit(jax.vmap(one))(seeds, jax.random.split(key, seeds.shape[0]))
    return np.asarray(ret), np.asarray(length)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    seeds = jnp.arange(n, dtype=jnp.uint32) + 10_000
    for name, policy in (("random", uniform), ("strongest", strongest)):
        start = time.time()
        ret, length = play(policy, seeds, jax.random.PRNGKey(0))
        values, counts = np.unique(ret, return_counts=True)
        print(
            f"{name}: mean {ret.mean():+.3f} sd {ret.std(ddof=1):.3f} "
            f"se {ret.std(ddof=1) / np.sqrt(n):.3f} wins {np.mean(ret > 0):.3f} "
            f"length {length.mean():.1f} ({time.time() - start:.0f} s)"
        )
        print("   ", dict(zip(values.tolist(), counts.tolist(), strict=True)))


if __name__ == "__main__":
    main()
