"""What the envs of ``envforge.make`` cost over the raw port, measured side by side in one run.

    python benchmarks/vector_env_overhead.py                      # pong, batches 64, 1024, 16384
    python benchmarks/vector_env_overhead.py --env cartpole --repeats 7 --json out.json

Rows per batch size, each a median of interleaved runs of random-action steps with auto-reset:

* rust raw: ``EnvBatch.step`` into preallocated buffers, then ``reset_where`` on ended envs
  (``envforge.bench.rust_loop.stepper``, what ``envforge bench`` times).
* rust vector env: ``envforge.make(env, target="rust", num_envs=n)`` stepped with the same
  kind of actions (NEXT_STEP auto-reset, fresh arrays per step, float64 rewards, episode cap).
* jax raw host loop: the port's step vmapped and jitted with a where-reset of ended envs,
  called once per step from numpy with observations, rewards and flags copied back: the least
  a host-side training loop on the JAX port does.
* jax vector env: ``envforge.make(env, target="jax", num_envs=n)``.
* jax raw scan / gymnax scan: a jitted ``lax.scan`` of 64 steps of the port's vmapped step with
  a fresh reset kept where an episode ended (``envforge.bench.jax_loop``), against the same scan
  over the gymnax API (``jax.vmap(env.step)``, which also counts lengths and returns).

Ratios are to the raw row of the same kind. Compile/build time is excluded (first call untimed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import envforge  # noqa: E402
from envforge.bench.measure import Measurement, calls_run, interleaved  # noqa: E402
from envforge.spec import EnvSpec  # noqa: E402
from envforge.resolve import default_port  # noqa: E402
from envforge.spec import spec_for_name  # noqa: E402
from envforge.verify.policies import random_actions  # noqa: E402

SCAN = 64


def cycled(spec: EnvSpec, n: int) -> Callable[[], np.ndarray]:
    rng = np.random.default_rng(0)
    drawn = [random_actions(spec, rng, n) for _ in range(16)]
    counter = itertools.count()
    return lambda: drawn[next(counter) % 16]


def vector_call(env: Any, spec: EnvSpec, n: int) -> Callable[[], None]:
    env.reset(seed=0)
    actions = cycled(spec, n)
    return lambda: env.step(actions())


def rust_raw(spec: EnvSpec, n: int) -> Callable[[], None]:
    from envforge.backends.rust import BATCH_CLASS, RustDriver
    from envforge.bench.jax_loop import mlp_params
    from envforge.bench.rust_loop import stepper

    driver = RustDriver(spec, default_port(spec, "rust"), strict_float=spec.compare.strict_float)
    batch = getattr(driver.module, BATCH_CLASS)(n, spec.compare.strict_float)
    batch.reset(np.arange(n, dtype=np.uint32))
    rng = np.random.default_rng(0)
    return stepper(spec, batch, n, "random", mlp_params(spec, 8), rng)


def jax_host_raw(spec: EnvSpec, n: int) -> Callable[[], None]:
    from envforge.train.port_env import load_port

    port = load_port(default_port(spec, "jax"), spec.name)

    @jax.jit
    def step(state: Any, actions: Any, seeds: Any) -> tuple:
        after, obs, reward, terminated, truncated = jax.vmap(port.step)(state, actions)
        done = terminated | truncated
        fresh = jax.vmap(port.reset)(seeds)
        state = jax.tree_util.tree_map(
            lambda f, a: jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), f, a),
            fresh,
            after,
        )
        obs = jnp.where(done[:, None], jax.vmap(port.observe)(state), obs)
        return state, obs, reward, terminated, truncated

    box = [jax.vmap(port.reset)(jnp.arange(n, dtype=jnp.uint32))]
    actions = cycled(spec, n)
    seeds = itertools.count()

    def call() -> None:
        fresh = (np.arange(n, dtype=np.uint64) + next(seeds) * n).astype(np.uint32)
        box[0], *out = step(box[0], jnp.asarray(actions()), jnp.asarray(fresh))
        for x in out:
            np.array(x)

    return call


def jax_scans(spec: EnvSpec, n: int) -> tuple[Callable[[], None], Callable[[], None]]:
    from envforge.bench.jax_loop import initial_carry, make_rollout
    from envforge.train.port_env import load_port

    port = load_port(default_port(spec, "jax"), spec.name)
    rollout = jax.jit(make_rollout(port, spec, "random", SCAN))
    raw_carry = [initial_carry(port, n)]

    def raw() -> None:
        raw_carry[0] = jax.block_until_ready(rollout(raw_carry[0], {}))

    env = envforge.make(spec.name)
    params = env.default_params
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    assert spec.action.n is not None, "this benchmark draws discrete actions"

    @jax.jit
    def gymnax_rollout(carry: tuple) -> tuple:
        def body(c: tuple, _: None) -> tuple:
            # actions from a per-env xorshift32, as the raw scan draws them; the step keys
            # (one per env per step) are the gymnax API's own cost
            obs, state, key, rng, total = c
            rng = rng ^ (rng << 13)
            rng = rng ^ (rng >> 17)
            rng = rng ^ (rng << 5)
            actions = (rng % jnp.uint32(spec.action.n)).astype(jnp.int32)
            key, k_step = jax.random.split(key)
            obs, state, reward, _, _ = step(jax.random.split(k_step, n), state, actions, params)
            return (obs, state, key, rng, total + reward), None

        return jax.lax.scan(body, carry, None, length=SCAN)[0]

    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.key(0), n), params
    )
    rng = jnp.arange(1, n + 1, dtype=jnp.uint32) * jnp.uint32(2654435761)
    gymnax_carry = [(obs, state, jax.random.key(1), rng, jnp.zeros(n))]

    def gymnax() -> None:
        gymnax_carry[0] = jax.block_until_ready(gymnax_rollout(gymnax_carry[0]))

    return raw, gymnax


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="pong")
    parser.add_argument("--batch-sizes", default="64,1024,16384")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-run-s", type=float, default=0.3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    spec = spec_for_name(args.env)
    jobs: list[tuple[Measurement, Any]] = []
    for n in (int(x) for x in args.batch_sizes.split(",")):
        rows: list[tuple[str, Callable[[], None], int]] = []
        if "rust" in spec.port:
            rows.append(("rust raw", rust_raw(spec, n), n))
            rows.append(
                ("rust vector env", vector_call(envforge.make(spec.name, "rust", n), spec, n), n)
            )
        rows.append(("jax raw host loop", jax_host_raw(spec, n), n))
        rows.append(("jax vector env", vector_call(envforge.make(spec.name, "jax", n), spec, n), n))
        raw_scan, gymnax_scan = jax_scans(spec, n)
        rows.append(("jax raw scan", raw_scan, n * SCAN))
        rows.append(("gymnax scan", gymnax_scan, n * SCAN))
        for label, call, steps in rows:
            for _ in range(3):  # compiles (a jitted call's second input may differ in kind)
                call()
            jobs.append(
                (Measurement(label, "port", "random", n), calls_run(call, steps, args.min_run_s))
            )
    results = interleaved(jobs, args.repeats)
    by_key = {(m.implementation, m.batch): m for m in results}
    raw_of = {
        "rust vector env": "rust raw",
        "jax vector env": "jax raw host loop",
        "gymnax scan": "jax raw scan",
    }
    print(f"{'implementation':<20}{'batch':>7}{'steps/s':>14}{'vs raw':>9}")
    for m in results:
        base = by_key.get((raw_of.get(m.implementation, m.implementation), m.batch))
        ratio = (m.sps or 0) / (base.sps or 1) if base else 1.0
        print(f"{m.implementation:<20}{m.batch:>7}{m.sps or 0:>14,.0f}{ratio:>9.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps([m.to_dict() for m in results], indent=2))


if __name__ == "__main__":
    main()
