"""Steps per second of the pong Rust port beside the C reference and the JAX port, in one run.

    python benchmarks/rust_vs_c.py                       # batch 1k..64k, Rust on 1 and 2 threads
    python benchmarks/rust_vs_c.py --json out.json --repeats 7

* C loop: the reference stepped in a plain single-threaded C loop (envforge.bench.c_loop: per
  env a xorshift action, ``pong_step``, reset when done, ``pong_observe``), timed inside C.
* Rust: ``EnvBatch.step`` on the whole batch per call (rayon across envs, GIL released), writing
  observations, rewards and flags into preallocated numpy buffers; actions cycle through 16
  pre-drawn arrays. Finished games are not reset (in pong a game lasts thousands of steps, so
  this changes nothing measurable). Each thread count runs in its own process, because rayon's
  pool is sized once per process (``RAYON_NUM_THREADS``).
* JAX: the port vmapped and jitted, ``lax.scan`` over steps with random actions
  (envforge.bench.jax_loop), on the CPU.
All in fast float mode; build and compile times are excluded and reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from envforge.bench.measure import BenchSettings, timed_runs  # noqa: E402

BATCHES = (1024, 4096, 16384, 65536)


def measure_rust(batches: tuple[int, ...], repeats: int, min_run_s: float) -> dict:
    """In this process (RAYON_NUM_THREADS already set by the caller): SPS per batch size."""
    from envforge.backends.rust import RustDriver
    from envforge.spec import spec_for_name

    spec = spec_for_name("pong")
    start = time.perf_counter()
    driver = RustDriver(spec, ROOT / "generated/pong/rust", strict_float=False)
    build_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    out, busy = {}, {}
    for n in batches:
        batch = driver.module.EnvBatch(n)
        batch.reset(np.arange(n, dtype=np.uint32))
        actions = [rng.integers(0, 3, n).astype(np.int32) for _ in range(16)]
        obs = np.zeros((n, *spec.observation.shape), np.float32)
        reward, terminated, truncated = (
            np.zeros(n, np.float32),
            np.zeros(n, bool),
            np.zeros(n, bool),
        )
        buffers = (obs, reward, terminated, truncated)

        def call(batch=batch, actions=actions, buffers=buffers, tick=[0]):  # type: ignore[no-untyped-def]  # noqa: B006
            tick[0] += 1
            batch.step(actions[tick[0] % 16], *buffers)

        wall, cpu = time.perf_counter(), time.process_time()
        out[n] = timed_runs(call, n, repeats, min_run_s)
        busy[n] = (time.process_time() - cpu) / (time.perf_counter() - wall)
    return {"build_s": build_s, "runs": out, "cores_busy": busy}


def rust_in_subprocess(threads: int, args: argparse.Namespace) -> dict:
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads)}
    cmd = [
        sys.executable,
        __file__,
        "--rust-only",
        "--batches",
        ",".join(map(str, args.batches)),
        "--repeats",
        str(args.repeats),
        "--min-run-s",
        str(args.min_run_s),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    data = json.loads(proc.stdout)
    data["runs"] = {int(k): v for k, v in data["runs"].items()}
    data["cores_busy"] = {int(k): v for k, v in data["cores_busy"].items()}
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--batches", type=lambda s: tuple(int(x) for x in s.split(",")), default=BATCHES
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-run-s", type=float, default=0.3)
    parser.add_argument(
        "--threads", type=lambda s: tuple(int(x) for x in s.split(",")), default=(1, 2)
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rust-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rust_only:
        print(json.dumps(measure_rust(args.batches, args.repeats, args.min_run_s)))
        return

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from envforge.bench.c_loop import measure_c_loop
    from envforge.bench.jax_loop import measure_jax
    from envforge.spec import spec_for_name

    spec = spec_for_name("pong")
    settings = BenchSettings(
        batch_sizes=args.batches,
        repeats=args.repeats,
        min_run_s=args.min_run_s,
        policies=("random",),
    )
    median = lambda runs: float(np.median(runs))  # noqa: E731
    c = {
        m.batch: median(m.runs_sps)
        for m in measure_c_loop(spec, ROOT / "references/pong/pong.c", settings)
    }
    rust = {t: rust_in_subprocess(t, args) for t in args.threads}
    jax_runs = measure_jax(spec, ROOT / "generated/pong/jax", settings)
    jax = {m.batch: median(m.runs_sps) for m in jax_runs}

    cpus = os.sched_getaffinity(0)
    print(
        f"pong, steps/s (median of {args.repeats} runs), {len(cpus)} cores available, load {os.getloadavg()[0]:.1f}"
    )
    head = ["batch", "C loop", *(f"Rust {t}T" for t in args.threads), "JAX (CPU)"]
    head += [f"Rust {t}T / C" for t in args.threads] + ["cores busy"]
    print(" | ".join(f"{h:>13}" for h in head))
    rows = []
    for n in args.batches:
        r = {t: median(rust[t]["runs"][n]) for t in args.threads}
        cells = [
            n,
            c[n],
            *(r[t] for t in args.threads),
            jax[n],
            *(r[t] / c[n] for t in args.threads),
        ]
        rows.append(
            {"batch": n, "c": c[n], "jax": jax[n], **{f"rust_{t}t": r[t] for t in args.threads}}
        )
        ratios = len(args.threads)
        text = [f"{cells[0]:>13}"] + [f"{v:>13.3e}" for v in cells[1:-ratios]]
        text += [f"{v:>12.2f}x" for v in cells[-ratios:]]
        # CPU time / wall time of the Rust process: below the thread count, the machine was busy
        busy = " / ".join(f"{rust[t]['cores_busy'][n]:.2f}" for t in args.threads)
        text.append(f"{busy:>13}")
        rows[-1]["rust_cores_busy"] = {t: rust[t]["cores_busy"][n] for t in args.threads}
        print(" | ".join(text))
    compile_s = {m.batch: m.compile_s for m in jax_runs}
    print(
        f"excluded: Rust build {rust[args.threads[0]]['build_s']:.1f} s (cached), JAX compile {compile_s}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": rows, "jax_compile_s": compile_s, "load": os.getloadavg()}, indent=2
            )
        )


if __name__ == "__main__":
    main()
