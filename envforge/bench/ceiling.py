"""An honest ceiling: what this machine could do at best for one env, from two measured limits.

* memory: bytes a batched step must move at least (each env's state read and written, its
  observation written, the loop's RNG and reward accumulator) against copy bandwidth measured
  at that batch's footprint (``batch * bytes_per_step``): a batch whose arrays fit in cache
  is limited by the cache's bandwidth, not DRAM's (CartPole at 65536 envs is 7 MB; on a
  2-core EPYC with 32 MiB of L3, copies of 8-16 MiB footprints ran at 84-179 GB/s in runs
  of one day and one of 256 MiB at 22-31 GB/s), and a ceiling computed from DRAM would be
  one a port could pass;
* compute: operations in one env step (counted from the port's jaxpr: one per output element of
  each arithmetic/compare/select primitive, ``TRANSCENDENTAL_COST`` for sin/exp/tanh/...)
  against measured float32 matmul FLOP/s. That peak counts a fused multiply-add as two
  operations, so it is the rate of operations that come in multiply-add pairs; any other
  operation (a compare, a select, an integer op, a lone add) takes a vector slot for one
  operation, at half that rate. So a step costs ``ops - fma_pairs`` slots, where
  ``fma_pairs`` counts float multiplies whose one use is an add or subtract (a fusing compiler
  can make each pair one FMA), and the machine runs ``peak_flops / 2`` slots per second. It
  still errs high (every slot filled, no branches, no shuffles).

ceiling = min(bandwidth(batch * bytes_per_step) / bytes_per_step,
              (peak_flops / 2) / (ops_per_step - fma_pairs)).
"""

from __future__ import annotations

import os
import platform
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envforge.spec import EnvSpec

TRANSCENDENTAL_COST = 10
TRANSCENDENTAL = frozenset(
    ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh")
    + ("acosh", "atanh", "exp", "exp2", "log", "log1p", "expm1", "logistic", "pow", "sqrt")
    + ("rsqrt", "cbrt", "erf", "erfc", "erf_inv", "lgamma", "digamma")
)
FREE = frozenset(
    ("broadcast_in_dim", "reshape", "squeeze", "expand_dims", "copy", "copy_p", "pjit")
    + ("closed_call", "custom_jvp_call", "custom_vjp_call", "stop_gradient", "slice")
    + ("dynamic_slice", "concatenate", "transpose", "iota")
)
"""Primitives that only move or relabel data (their cost is in the bytes, not the ops)."""
SUB_JAXPRS = ("jaxpr", "call_jaxpr", "fun_jaxpr", "body_jaxpr", "cond_jaxpr")


@dataclass
class Machine:
    cpu: str
    cores: int
    memory_gib: float
    bandwidth_gbs: float
    """Best measured copy bandwidth (read + write bytes per second, 1e9)."""
    peak_gflops: float
    """Best measured float32 matmul throughput (1e9 FLOP/s)."""
    load_before: tuple[float, float, float]
    bandwidth_gbs_measured: list[float] | None = None
    """Each measurement of ``bandwidth_gbs`` where there were several (the best is used)."""
    peak_gflops_measured: list[float] | None = None
    bandwidth_by_footprint: list[list[float]] | None = None
    """``[footprint_bytes, GB/s]`` of copies whose source and destination together span the
    footprint, smallest first (``bandwidth_gbs`` is the DRAM figure, a 512 MiB footprint)."""
    system: str | None = None
    """Kernel and Python of the measuring run (``Linux 6.1.0, Python 3.11.2``); not recorded
    before 2026-12-02."""

    def bandwidth_at(self, footprint: float) -> float:
        """GB/s for a working set of ``footprint`` bytes: the best copy measured at any
        footprint that holds it (a smaller working set is never slower to move than a larger
        one, so a lower reading at a small footprint is overhead or noise), never below the
        DRAM figure."""
        held = [gbs for size, gbs in self.bandwidth_by_footprint or [] if footprint <= size]
        return max([self.bandwidth_gbs, *held])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return round(pages / 2**30, 1)
    except (ValueError, OSError):
        return 0.0


def measure_bandwidth(mib: float = 256, repeats: int = 5) -> float:
    """GB/s of array copies (2 bytes moved per byte copied), one thread per core, ``mib`` MiB
    copied (a footprint of twice that). A small copy is repeated inside each thread's timed
    call until the run copies at least 256 MiB, so the thread pool's start-up and the loop's
    own overhead hardly count."""
    src = np.ones(max(1024, int(mib * 2**20) // 4), np.float32)
    dst = np.empty_like(src)
    threads = os.cpu_count() or 1
    bounds = np.linspace(0, len(src), threads + 1).astype(int)
    inner = max(1, (256 * 2**20) // src.nbytes)

    def copy(k: int) -> None:
        for _ in range(inner):
            np.copyto(dst[bounds[k] : bounds[k + 1]], src[bounds[k] : bounds[k + 1]])

    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(copy, range(threads)))  # warm: pages touched, caches filled
        for _ in range(repeats):
            start = time.perf_counter()
            list(pool.map(copy, range(threads)))
            best = max(best, 2 * inner * src.nbytes / (time.perf_counter() - start))
    return best / 1e9


FOOTPRINTS_MIB = (1, 2, 4, 8, 16, 32, 64)
"""Footprints (source + destination) at which copy bandwidth is measured for batches whose
arrays may fit in cache; past the largest the DRAM figure applies."""


def measure_bandwidth_by_footprint() -> list[list[float]]:
    return [[float(mib * 2**20), measure_bandwidth(mib / 2)] for mib in FOOTPRINTS_MIB]


def measure_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of a float32 matmul (numpy's BLAS, all cores)."""
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    b = np.random.default_rng(1).random((n, n), dtype=np.float32)
    a @ b  # warm up the BLAS threads
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - start))
    return best / 1e9


def limits(machine: dict[str, Any]) -> str:
    """The machine's measured limits, with the individual measurements where there are two."""
    parts = []
    for key, unit, fmt in (
        ("bandwidth_gbs", "GB/s copy bandwidth", ".1f"),
        ("peak_gflops", "GFLOP/s float32 matmul", ".0f"),
    ):
        text = f"{machine[key]:{fmt}} {unit}"
        seen = machine.get(f"{key}_measured")
        if seen:
            text += (
                f" (best of {' and '.join(f'{v:{fmt}}' for v in seen)}, before and after the run)"
            )
        parts.append(text)
    curve = machine.get("bandwidth_by_footprint")
    if curve:
        parts.append(
            "copy bandwidth by footprint (source + destination) "
            + ", ".join(f"{size / 2**20:g} MiB {gbs:.0f}" for size, gbs in curve)
            + " GB/s"
            + (" (best of before and after)" if machine.get("bandwidth_gbs_measured") else "")
        )
    return ", ".join(parts)


def measure_machine() -> Machine:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return Machine(
        cpu=cpu_name(),
        cores=os.cpu_count() or 1,
        memory_gib=memory_gib(),
        bandwidth_gbs=measure_bandwidth(),
        peak_gflops=measure_peak_flops(),
        load_before=(load[0], load[1], load[2]),
        bandwidth_by_footprint=measure_bandwidth_by_footprint(),
        system=f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
    )


# ---- per-step cost of one env -------------------------------------------------------------


def _called(eqn: Any) -> Iterator[tuple[Any, int]]:
    """(jaxpr, times it runs) of each jaxpr an equation calls (a scan's body ``length`` times);
    ``cond`` branches are not here (the callers take the dearest)."""
    for key in SUB_JAXPRS:
        sub = eqn.params.get(key)
        if sub is not None:
            times = eqn.params.get("length", 1) if eqn.primitive.name == "scan" else 1
            yield getattr(sub, "jaxpr", sub), times


def _jaxpr_ops(jaxpr: Any) -> tuple[float, int]:
    """(ops, transcendental ops) of a jaxpr, weighted by output elements, sub-jaxprs included."""
    ops, trans = 0.0, 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        for sub, times in _called(eqn):
            o, t = _jaxpr_ops(sub)
            ops, trans = ops + o * times, trans + t * times
        if "branches" in eqn.params:
            costs = [_jaxpr_ops(b.jaxpr) for b in eqn.params["branches"]]
            o, t = max(costs)
            ops, trans = ops + o, trans + t
        if name in FREE or any(k in eqn.params for k in (*SUB_JAXPRS, "branches")):
            continue
        size = sum(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
        if name in TRANSCENDENTAL:
            ops += size * TRANSCENDENTAL_COST
            trans += size
        else:
            ops += size
    return ops, trans


def fma_pairs(jaxpr: Any) -> float:
    """Elements of float multiplies whose one use is an add or subtract (each pair can be one
    fused multiply-add), in this jaxpr and the ones it calls; a pair split across a call
    boundary is not counted (the ceiling then errs low by that pair)."""
    uses: dict[int, list[str]] = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if type(v).__name__ == "Var":
                uses.setdefault(id(v), []).append(eqn.primitive.name)
    for v in jaxpr.outvars:
        if type(v).__name__ == "Var":
            uses.setdefault(id(v), []).append("output")
    pairs = 0.0
    for eqn in jaxpr.eqns:
        pairs += sum(fma_pairs(sub) * times for sub, times in _called(eqn))
        if eqn.primitive.name != "mul":
            continue
        out = eqn.outvars[0]
        if out.aval.dtype.kind == "f" and uses.get(id(out)) in (["add"], ["sub"]):
            pairs += int(np.prod(out.aval.shape))
    return pairs


@dataclass
class StepCost:
    state_bytes: int
    obs_bytes: int
    bytes_per_step: int
    ops_per_step: float
    transcendentals: int
    mlp_ops: float
    fused_instructions: int = 0
    """HLO operations XLA runs per env step in the compiled bench loop (inside its fused
    loops; parameters, constants, broadcasts and bitcasts not counted, see ``NOT_WORK``). Far
    above ``ops_per_step`` means XLA recomputes shared work in each fusion that reads it. Until
    2026-12-01 those were counted too (pong: 2846 then, 1619 operations of them)."""
    fma_pairs: float = 0.0
    """Of ``ops_per_step``, multiply-add pairs that can fuse (two operations, one slot)."""
    mlp_fma_pairs: float = 0.0
    """The same for the MLP policy (its matmuls are all multiply-adds)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_cost(spec: EnvSpec, module: Any, hidden: int) -> StepCost:
    """Bytes and ops of one env step in the bench loop: step + observe + auto-reset + action."""
    import jax
    import jax.numpy as jnp

    state = module.reset(jnp.uint32(0))
    action = jnp.zeros(spec.action.shape, spec.action.dtype)

    def one(state: Any, action: Any, seed: Any) -> Any:
        after = module.step(state, action)
        fresh = module.reset(seed)
        return after, fresh, module.observe(fresh)

    closed = jax.make_jaxpr(one)(state, action, jnp.uint32(1))
    ops, trans = _jaxpr_ops(closed.jaxpr)
    pairs = fma_pairs(closed.jaxpr)
    ops += 2 * 6 + after_select_ops(spec)  # two xorshift32 draws, where(done, fresh, next)
    state_bytes = sum(f.np_dtype.itemsize * int(np.prod(f.shape)) for f in spec.state)
    obs_bytes = int(np.prod(spec.observation.shape)) * np.dtype(spec.observation.dtype).itemsize
    action_bytes = int(np.prod(spec.action.shape or (1,))) * 4
    # state read + written, obs written, action, rng and reward accumulator read + written
    moved = 2 * state_bytes + obs_bytes + action_bytes + 2 * 4 + 2 * 4
    obs_dim = int(np.prod(spec.observation.shape))
    n_out = spec.action.n if spec.action.type == "discrete" else int(np.prod(spec.action.shape))
    n_out = n_out or 1
    mlp = 2.0 * (obs_dim * hidden + hidden * n_out) + hidden * (TRANSCENDENTAL_COST + 1) + n_out
    mlp_pairs = float(obs_dim * hidden + hidden * n_out)
    return StepCost(
        state_bytes, obs_bytes, moved, ops, trans, mlp, fma_pairs=pairs, mlp_fma_pairs=mlp_pairs
    )


def after_select_ops(spec: EnvSpec) -> int:
    return sum(int(np.prod(f.shape)) for f in spec.state)


def ceiling_sps(
    machine: Machine, cost: StepCost, policy: str, batch: int | None = None
) -> tuple[float, str]:
    """(steps per second, which limit binds) for the given policy at ``batch`` envs (its
    footprint picks the bandwidth; ``None``: DRAM's)."""
    mlp = policy == "mlp"
    ops = cost.ops_per_step + (cost.mlp_ops if mlp else 0.0)
    slots = ops - cost.fma_pairs - (cost.mlp_fma_pairs if mlp else 0.0)
    bandwidth = (
        machine.bandwidth_gbs
        if batch is None
        else machine.bandwidth_at(float(batch) * cost.bytes_per_step)
    )
    memory = bandwidth * 1e9 / cost.bytes_per_step
    memory_bound = "cache" if bandwidth > machine.bandwidth_gbs else "memory"
    compute = machine.peak_gflops * 1e9 / 2 / slots
    return (memory, memory_bound) if memory < compute else (compute, "compute")


NOT_WORK = frozenset(
    ("parameter", "constant", "broadcast", "bitcast", "get-tuple-element", "tuple")
)
"""HLO opcodes inside a fusion that compute nothing per element (they name inputs, splat a
scalar or relabel a buffer): 43% of the pong loop's fused instructions."""


def fused_instruction_count(spec: EnvSpec, module: Any) -> int:
    """Operations inside the fused computations of the compiled bench loop (random policy,
    fresh resets): the per-element work XLA actually emits for one env step. Parameters,
    constants, broadcasts and bitcasts (``NOT_WORK``) are not counted."""
    import jax

    from envforge.bench.jax_loop import initial_carry, make_rollout

    carry = initial_carry(module, 1024)
    compiled = jax.jit(make_rollout(module, spec, "random", 16)).lower(carry, {}).compile()
    return hlo_fused_work(compiled.as_text() or "")


def hlo_fused_work(text: str) -> int:
    """Instructions of the fused computations in HLO ``text`` that do per-element work."""
    total = 0
    for block in text.split("\n\n"):
        header = block.lstrip().split("\n", 1)[0]
        if header.startswith("%fused") or header.startswith("fused_computation"):
            for line in block.splitlines()[1:]:
                match = re.search(r" = [^ ]+ ([a-z][a-z0-9_-]*)\(", line)
                if match and match.group(1) not in NOT_WORK:
                    total += 1
    return total
