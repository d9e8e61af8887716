"""Steps per second of a JAX port, measured in a child process (generated code never runs in
ours): a jitted ``lax.scan`` of the vmapped step with random actions, compile time excluded.

    python -m envforge.repair.throughput <env.toml> <port dir> [--batch N] [--steps N]

prints one JSON line: steps_per_second, batch, steps, device, compile_s.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.sandbox.base import Sandbox, SandboxLimits
from envforge.sandbox.process import ProcessSandbox
from envforge.spec import EnvSpec


@dataclass(frozen=True)
class Throughput:
    steps_per_second: float
    batch: int
    steps: int
    device: str
    compile_s: float


def measure(spec: EnvSpec, port_dir: Path, batch: int = 4096, steps: int = 200) -> Throughput:
    import jax
    import jax.numpy as jnp

    from envforge.backends.jax import find_port_module, load_module

    module = load_module(find_port_module(port_dir, spec.name))
    step = jax.vmap(module.step)
    action = spec.action

    def actions(key: Any) -> Any:
        if action.type == "discrete":
            return jax.random.randint(key, (batch,), 0, action.n or 1, dtype=jnp.int32)
        low, high = action.bounds()
        return jax.random.uniform(key, (batch, *action.shape), jnp.float32, low, high)

    def rollout(state: Any, key: Any) -> Any:
        def body(carry: Any, _: None) -> Any:
            state, key = carry
            key, sub = jax.random.split(key)
            state, _obs, reward, _terminated, _truncated = step(state, actions(sub))
            return (state, key), reward.sum()

        (state, _), rewards = jax.lax.scan(body, (state, key), None, length=steps)
        return state, rewards.sum()

    run = jax.jit(rollout)
    state = jax.jit(jax.vmap(module.reset))(jnp.arange(batch, dtype=jnp.uint32))
    started = time.perf_counter()
    jax.block_until_ready(run(state, jax.random.PRNGKey(0)))
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    jax.block_until_ready(run(state, jax.random.PRNGKey(1)))
    elapsed = time.perf_counter() - started
    device = jax.devices()[0].platform
    return Throughput(batch * steps / elapsed, batch, steps, device, compile_s)


def measure_isolated(
    spec: EnvSpec,
    port_dir: Path,
    batch: int = 4096,
    steps: int = 200,
    sandbox: Sandbox | None = None,
) -> Throughput | str:
    """The measurement from a sandboxed child process, or why it failed (one line)."""
    sandbox = sandbox or ProcessSandbox(SandboxLimits(wall_s=600, cpu_s=1200))
    command = " ".join(
        shlex.quote(part)
        for part in (sys.executable, "-m", "envforge.repair.throughput", str(spec.root / "env.toml"),
                     str(port_dir), "--batch", str(batch), "--steps", str(steps))
    )  # fmt: skip
    result = sandbox.run(command, port_dir)
    lines = result.output.strip().splitlines()
    if result.exit_code != 0 or not lines:
        tail = lines[-1] if lines else "no output"
        return f"throughput measurement failed ({result.describe().splitlines()[0]}): {tail}"
    try:
        return Throughput(**json.loads(lines[-1]))
    except (json.JSONDecodeError, TypeError) as e:
        return f"throughput measurement printed no result: {e}"


def main(argv: list[str] | None = None) -> None:
    from envforge.spec import load_spec

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("spec")
    parser.add_argument("port")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    result = measure(load_spec(args.spec), Path(args.port), args.batch, args.steps)
    print(json.dumps(result.__dict__))


if __name__ == "__main__":
    main()
