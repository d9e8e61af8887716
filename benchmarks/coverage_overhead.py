"""What measuring reference coverage costs a reference's steps, side by side in one run.

    python benchmarks/coverage_overhead.py [--repeats 5]

Rows: the pong C reference's batched step (4096 envs), plain build against the gcov-instrumented
one (``coverage/gcov.py``), and CartPole's gymnasium step (256 envs, one env object each)
without and with coverage.py counting (``coverage/lines.py``). Both in this process; the
ratio is instrumented / plain steps per second (medians of interleaved runs). Reading coverage
(a gcov run, or coverage.py's data) happens once per level and is timed separately.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from envforge.backends.c import CDriver  # noqa: E402
from envforge.backends.gymnasium import GymnasiumDriver  # noqa: E402
from envforge.bench.measure import Measurement, calls_run, interleaved  # noqa: E402
from envforge.spec import spec_for_name  # noqa: E402
from envforge.verify.strategies import sample_actions, sample_states  # noqa: E402


def stepper(driver, spec, n):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    state, actions = sample_states(spec, rng, n), sample_actions(spec, rng, n)
    return lambda: driver.step(state, actions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-run-s", type=float, default=0.3)
    args = parser.parse_args()
    pong, cartpole = spec_for_name("pong"), spec_for_name("cartpole")
    reference = ROOT / "references/pong/pong.c"
    c_plain = CDriver(pong, reference, strict_float=True)
    c_counted = CDriver(pong, reference, strict_float=True)
    c_counted.coverage_start()
    g_plain = GymnasiumDriver(cartpole, "CartPole-v1")
    g_counted = GymnasiumDriver(cartpole, "CartPole-v1")
    rows = [
        ("pong.c plain", stepper(c_plain, pong, 4096), 4096),
        ("pong.c gcov", stepper(c_counted, pong, 4096), 4096),
        ("CartPole plain", stepper(g_plain, cartpole, 256), 256),
    ]
    g_counted.coverage_start()  # traces this whole process: paused for every other row
    counting = g_counted._coverage
    assert counting is not None

    def untraced(call):  # type: ignore[no-untyped-def]
        def run() -> None:
            with counting.paused():
                call()

        return run

    rows = [(label, untraced(call), n) for label, call, n in rows]
    rows.append(("CartPole coverage.py", stepper(g_counted, cartpole, 256), 256))
    jobs = [
        (Measurement(label, "reference", "random", n), calls_run(call, n, args.min_run_s))
        for label, call, n in rows
    ]
    results = interleaved(jobs, args.repeats)
    print(f"{'reference step':<24}{'steps/s':>14}{'vs plain':>10}")
    for i, m in enumerate(results):
        base = results[i - i % 2]
        print(f"{m.implementation:<24}{m.sps or 0:>14,.0f}{(m.sps or 0) / (base.sps or 1):>10.2f}")
    for label, driver in (("gcov read", c_counted), ("coverage.py read", g_counted)):
        start = time.perf_counter()
        driver.coverage_read()
        print(f"{label}: {1e3 * (time.perf_counter() - start):.1f} ms")
    for driver in (c_plain, c_counted, g_plain, g_counted):
        driver.close()


if __name__ == "__main__":
    main()
