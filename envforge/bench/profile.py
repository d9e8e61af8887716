"""Where one batched step of a JAX port spends its time, in the port's own terms: the job.

``_job_profile`` runs inside the sandbox (``envforge/bench/profile_report.py`` starts it): it
imports the port, traces ``vmap(step)`` at batch B, compiles ``jit(vmap(step))`` and returns
plain data: XLA's cost analysis of the compiled step (flops, transcendentals, bytes accessed),
its measured time per call, and an estimate per source line of the port from the jaxpr. Each
equation carries the traceback it was traced under; its line is the innermost frame in the
port's folder (equations of a library call count for the port line that made the call). Its
cost is counted from its shapes (a dot: 2·M·N·K flops; elementwise: one per output element;
a reduction: one per input element; bytes: its operands and results) and multiplied by the
trip count of every ``scan`` around it (a ``fori_loop`` with static bounds is a scan) and the
mean trips of every ``while_loop`` around it, measured at this batch's first states and actions
(``loop_trips.py``; under ``vmap`` the batch's longest; counted once where not measured). ``select_n`` equations are counted
by line: under ``vmap`` a ``cond`` with a batched predicate becomes both branches plus a select.
Gathers and scatters are counted by line too: XLA:CPU runs a batched one element by element,
which the flops-and-bytes estimate does not weigh (FrozenLake's three table lookups were about a
quarter of its rollout and ranked below its arithmetic).

By default the profiled call is ``vmap(step)`` alone, so a cost in ``reset`` never shows. With
``--include-reset`` it is the body of the bench's fresh-reset loop (``jax_loop.make_rollout``
less the policy): step, a reset of every env, ``where(done, reset, next)`` and ``observe``, so
the reset's lines (Leduc's re-deal) are weighed beside the step's, as the bench pays them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from envforge.bench.loop_trips import while_trips
from envforge.bench.profile_report import checked
from envforge.bench.suite import run_job
from envforge.sandbox.base import Sandbox
from envforge.sandbox.jobs import run_job as run_sandboxed_job
from envforge.spec import EnvSpec

REDUCTIONS = ("reduce_", "argmax", "argmin", "cum")
TRANSCENDENTAL = {"exp", "exp2", "log", "log1p", "sin", "cos", "tan", "tanh", "logistic"}
TRANSCENDENTAL |= {"atan2", "pow", "sqrt", "rsqrt", "cbrt", "erf", "erf_inv", "asin", "acos"}
BYTES_PER_UNIT = 4
"""A line's weight is flops + bytes / 4: one float32 moved counts as much as one operation."""
OUTSIDE = "(outside the port)"
MIN_TIMED_S = 0.2


def _size(aval: Any) -> int:
    return int(np.prod(getattr(aval, "shape", ()), dtype=np.int64))


def _nbytes(aval: Any) -> int:
    dtype = getattr(aval, "dtype", None)
    try:
        itemsize = np.dtype(dtype).itemsize if dtype is not None else 0
    except TypeError:  # an extended dtype (a PRNG key): its own itemsize when it says one
        itemsize = int(getattr(dtype, "itemsize", 0) or 0)
    return _size(aval) * itemsize


def eqn_cost(eqn: Any) -> tuple[float, float, float]:
    """(flops, transcendentals, bytes) of one equation without sub-jaxprs, from its shapes."""
    ins = [v.aval for v in eqn.invars]
    outs = [v.aval for v in eqn.outvars]
    name = eqn.primitive.name
    out_elems = sum(_size(a) for a in outs)
    moved = float(sum(_nbytes(a) for a in ins + outs))
    if name == "dot_general":
        (contract, _), _ = eqn.params["dimension_numbers"]
        k = int(np.prod([ins[0].shape[d] for d in contract], dtype=np.int64))
        return 2.0 * out_elems * k, 0.0, moved
    if name.startswith(REDUCTIONS):
        return float(sum(_size(a) for a in ins[:1])), 0.0, moved
    if name in TRANSCENDENTAL:
        return float(out_elems), float(out_elems), moved
    return float(out_elems), 0.0, moved


def _sub_jaxprs(eqn: Any) -> list[Any]:
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


class Walk:
    """Per-line totals over a jaxpr and the sub-jaxprs of its loops, conds and calls."""

    def __init__(self, folder: Path, measured: dict[int, list[int]] | None = None) -> None:
        self.folder = folder
        self.measured = measured or {}
        self.lines: dict[str, dict[str, float]] = {}
        self.loops: list[dict[str, Any]] = []
        self.conds = 0

    def where(self, eqn: Any, parent: str) -> str:
        from jax._src import source_info_util

        for frame in source_info_util.user_frames(eqn.source_info.traceback):
            path = Path(frame.file_name)
            if path.is_absolute() and path.resolve().is_relative_to(self.folder):
                return f"{path.resolve().relative_to(self.folder)}:{frame.start_line}"
        return parent

    def row(self, line: str) -> dict[str, float]:
        keys = ("flops", "transcendentals", "bytes", "selects", "gathers", "eqns")
        return self.lines.setdefault(line, dict.fromkeys(keys, 0.0))

    def walk(self, jaxpr: Any, trips: float, parent: str = OUTSIDE) -> None:
        for eqn in jaxpr.eqns:
            line = self.where(eqn, parent)
            name = eqn.primitive.name
            subs = _sub_jaxprs(eqn)
            if name == "scan":
                length = int(eqn.params["length"])
                self.loops.append({"kind": "scan", "line": line, "trips": length})
                for sub in subs:
                    self.walk(sub, trips * length, line)
            elif name == "while":
                runs = self.measured.get(id(eqn), [])
                mean = sum(runs) / len(runs) if runs else None
                loop = {"kind": "while", "line": line, "trips": None, "measured_trips": mean}
                self.loops.append(loop | {"runs": len(runs), "max_trips": max(runs, default=0)})
                for sub in subs:
                    self.walk(sub, trips * (mean if mean is not None else 1.0), line)
            elif subs:
                self.conds += name == "cond"
                for sub in subs:  # a cond's branches all counted: an upper bound
                    self.walk(sub, trips, line)
            else:
                flops, trans, moved = eqn_cost(eqn)
                row = self.row(line)
                row["flops"] += trips * flops
                row["transcendentals"] += trips * trans
                row["bytes"] += trips * moved
                row["eqns"] += 1
                row["selects"] += name == "select_n"
                row["gathers"] += name in GATHERS

    def table(self, sources: dict[str, list[str]]) -> list[dict[str, Any]]:
        weight = {k: r["flops"] + r["bytes"] / BYTES_PER_UNIT for k, r in self.lines.items()}
        total = sum(weight.values()) or 1.0
        rows = []
        for key, row in self.lines.items():
            file, _, number = key.rpartition(":")
            text = ""
            if key != OUTSIDE and file in sources:
                lines = sources[file]
                text = lines[int(number) - 1].strip() if 0 < int(number) <= len(lines) else ""
            item = {"line": key, "text": text[:160], "share": weight[key] / total}
            rows.append(item | {k: float(v) for k, v in row.items()})
        return sorted(rows, key=lambda r: -r["share"])


GATHERS = frozenset(
    {"gather", "scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"}
)
"""Indexed reads and writes with a batched index (``vmap`` turns ``t[i]`` and ``x.at[i]`` into
these; a ``dynamic_slice`` left in the traced step has an index shared by the batch)."""


def _xla_cost(compiled: Any) -> dict[str, float]:
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    keys = {"flops": "flops", "transcendentals": "transcendentals", "bytes": "bytes accessed"}
    return {name: float((cost or {}).get(key, 0.0)) for name, key in keys.items()}


STEP_ONLY = "one jit(vmap(step)) call"
WITH_RESET = (
    "one step of the bench's fresh-reset loop (vmap of step, reset of every env, "
    "where(done, reset, next), observe)"
)


def loop_body(module: Any) -> Any:
    """``body(states, actions, seeds) -> (states, obs, reward)``: the bench's fresh-reset loop
    step without its policy (``jax_loop.make_rollout``), not jitted."""
    import jax
    import jax.numpy as jnp

    step, reset = jax.vmap(module.step), jax.vmap(module.reset)
    observe = jax.vmap(module.observe)

    def body(states: Any, actions: Any, seeds: Any) -> Any:
        after, _, reward, terminated, truncated = step(states, actions)
        done = terminated | truncated
        fresh = reset(seeds)

        def pick(f: jax.Array, a: jax.Array) -> jax.Array:
            return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), f, a)

        state = jax.tree_util.tree_map(pick, fresh, after)
        return state, observe(state), reward

    return body


def _job_profile(
    spec: EnvSpec, port: str, batch: int, include_reset: bool = False
) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    from envforge.backends.jax import find_port_module
    from envforge.bench.jax_loop import load_port

    folder = Path(port).resolve()
    module_file = find_port_module(folder, spec.name).resolve()
    folder = folder if folder.is_dir() else folder.parent
    module = load_port(spec, Path(port))
    states = jax.jit(jax.vmap(module.reset))(jnp.arange(batch, dtype=jnp.uint32))
    shape = (batch, *spec.action.shape)
    if spec.action.type == "discrete" and spec.action.n:
        actions = (jnp.arange(batch) % spec.action.n).astype(spec.action.dtype).reshape(shape)
    else:
        actions = jnp.zeros(shape, spec.action.dtype)
    batched = loop_body(module) if include_reset else jax.vmap(module.step)
    args: tuple[Any, ...] = (states, actions)
    if include_reset:
        args += (jnp.arange(batch, 2 * batch, dtype=jnp.uint32),)
    closed = jax.make_jaxpr(batched)(*args)
    started = time.perf_counter()
    compiled = jax.jit(batched).lower(*args).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(*args))
    times: list[float] = []
    while sum(times) < MIN_TIMED_S or len(times) < 5:
        started = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - started)
    has_while = "while[" in str(closed.jaxpr)
    measured = while_trips(closed, *jax.tree_util.tree_leaves(args)) if has_while else {}
    walk = Walk(folder, measured)
    walk.walk(closed.jaxpr, 1.0)
    sources = {
        str(p.relative_to(folder)): p.read_text(errors="replace").splitlines()
        for p in sorted(folder.rglob("*.py"))
    }
    return {
        "env": spec.name,
        "port_file": str(module_file.relative_to(folder)),
        "batch": batch,
        "profiled": WITH_RESET if include_reset else STEP_ONLY,
        "device": str(jax.devices()[0].platform),
        "compile_s": compile_s,
        "step_s": float(np.median(times)),
        "timed_calls": len(times),
        "xla": _xla_cost(compiled),
        "lines": walk.table(sources),
        "loops": walk.loops,
        "conds": walk.conds,
        "bytes_per_unit": BYTES_PER_UNIT,
    }


PROFILE_TIMEOUT_S = 900.0
"""Limit on one sandboxed profile, start to result (a trace, a compile, a second of timing)."""


def run_profile(
    spec: EnvSpec, port: Path, batch: int, sandbox: Sandbox | None, include_reset: bool = False
) -> dict[str, Any]:
    """The profile of ``port`` at ``batch``, computed in ``sandbox`` (None: ``--sandbox none``)."""
    args = (spec, str(port), batch, include_reset)
    if sandbox is None:  # --sandbox none: a plain spawned process
        result = run_job(_job_profile, args, side="port")
    else:
        # a DriverFailure is the port's: a verdict on it (exit 1), not bad input
        result = run_sandboxed_job(
            sandbox,
            "envforge.bench.profile:_job_profile",
            args,
            readable=(port,),
            timeout_s=PROFILE_TIMEOUT_S,
            what="profile",
            port=port,
        )
    return checked(result)
