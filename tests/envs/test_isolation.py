"""Native and generated code runs isolated: a segfault, an exception or a hang becomes a finding
(level status ``error``), within the time limit, and the verifier carries on.

A tiny counter env (C reference + JAX port, written into tmp_path) keeps these fast.
"""

from __future__ import annotations

import time
from pathlib import Path

from conftest import QUICK_SWEEP

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

COUNTER_C = """\
#include <stdint.h>

typedef struct {
    int32_t x;
    int32_t t;
} Counter;

static int32_t* volatile nowhere; /* NULL, and the compiler cannot prove it */

void counter_reset(Counter* env, uint32_t seed) {
    env->x = (int32_t)(seed % 3u);
    env->t = 0;
}

void counter_step(Counter* env, int32_t action, float* reward, uint8_t* terminated,
                  uint8_t* truncated) {
    if (env->x >= CRASH_AT) *nowhere = 1;
    env->x += action;
    env->t += 1;
    *reward = (float)action;
    *terminated = (uint8_t)(env->x >= 10);
    *truncated = (uint8_t)(!*terminated && env->t >= 50);
}

void counter_observe(const Counter* env, float* obs) { obs[0] = (float)env->x; }
"""

COUNTER_TOML = """\
name = "counter"
reference = "counter.c"
episode_cap = 50
termination = "after.x >= 10"

[observation]
shape = [1]
low = 0.0
high = 20.0

[action]
type = "discrete"
n = 2

[rng]
mode = "replicate"

[c]
struct = "Counter"
prefix = "counter"
cflags = ["-DCRASH_AT={crash_at}"]

[[state]]
name = "x"
dtype = "int32"
low = 0
high = 9

[[state]]
name = "t"
dtype = "int32"
low = 0
high = 49

[verify]
l1_examples = 20
l1_sweep = 256
reset_samples = 200
l2_examples = 5
l3_episodes = 10
"""

COUNTER_PORT = '''\
"""JAX port of the counter test env."""
from typing import NamedTuple

import sys

import jax
import jax.numpy as jnp


class EnvState(NamedTuple):
    x: jax.Array
    t: jax.Array


def reset(seed):
    return EnvState(x=(seed % 3).astype(jnp.int32), t=jnp.int32(0))


def step(state, action):
    # BUG-HOOK
    s = EnvState(x=state.x + action.astype(jnp.int32), t=state.t + 1)
    terminated = s.x >= 10
    truncated = ~terminated & (s.t >= 50)
    return s, observe(s), action.astype(jnp.float32), terminated, truncated


def observe(state):
    return state.x.astype(jnp.float32)[None]


def to_canonical(state):
    return state._asdict()


def from_canonical(fields):
    return EnvState(x=fields["x"], t=fields["t"])
'''


def counter_env(tmp_path: Path, crash_at: int = 1000, port_bug: str = "") -> tuple[Path, Path]:
    """(env.toml, port module) of the counter env; ``port_bug`` replaces the port's hook line."""
    (tmp_path / "counter.c").write_text(COUNTER_C)
    toml = tmp_path / "env.toml"
    toml.write_text(COUNTER_TOML.format(crash_at=crash_at))
    port = tmp_path / "port" / "counter.py"
    port.parent.mkdir()
    port.write_text(COUNTER_PORT.replace("    # BUG-HOOK", port_bug or "    pass"))
    return toml, port


def test_counter_env_passes(tmp_path: Path) -> None:
    """The harness itself is sound: without a planted bug the tiny env verifies."""
    toml, port = counter_env(tmp_path)
    options = VerifyOptions(scale=1.0, seed_sweep=QUICK_SWEEP)
    report = verify(load_spec(toml), port, [0, 1, 2, 3], options)
    assert [lv.status for lv in report.levels] == ["pass"] * 4, report.to_dict()


def test_segfaulting_reference_is_a_crash_finding(tmp_path: Path) -> None:
    toml, port = counter_env(tmp_path, crash_at=7)
    report = verify(load_spec(toml), port, [0, 1, 2, 3], VerifyOptions(all_levels=True))
    # every level ran: each reopened the reference after the previous one killed it
    assert [lv.level for lv in report.levels] == [0, 1, 2, 3]
    for result in report.levels:
        assert result.status == "error", result.summary
        [finding] = result.findings
        assert finding.level == result.level
        assert finding.check == "crash"
        assert finding.extra["side"] == "reference"
        assert "SIGSEGV" in finding.message
    # the reference is broken: nothing is said about the port (exit 2, as bad input)
    assert report.verdict == "reference error" and report.exit_code == 2
    assert report.reference_error is not None and "SIGSEGV" in report.reference_error


def test_port_that_raises_is_an_exception_finding(tmp_path: Path) -> None:
    """The finding points at the line that raised, in the port's handler, and carries what
    the port wrote to stderr before (a Rust panic's location is printed there)."""
    bug = '    print("why: the step is broken", "stack " * 1000, file=sys.stderr, flush=True)\n'
    bug += '    raise ValueError("no step for you")'
    toml, port = counter_env(tmp_path, port_bug=bug)
    raised_at = port.read_text().splitlines().index('    raise ValueError("no step for you")') + 1
    report = verify(load_spec(toml), port, [0, 1], VerifyOptions(all_levels=True))
    for result in report.levels:
        assert result.status == "error"
        [finding] = result.findings
        assert finding.check == "exception"
        assert finding.extra == {"side": "port", "call": "step", "handler": "step"}
        assert "ValueError: no step for you" in finding.message
        assert f"(at counter.py:{raised_at}, in step)" in finding.message
        assert [(loc.file, loc.line) for loc in finding.port_lines][0] == (str(port), raised_at)
        assert "Traceback" in finding.detail and "counter.py" in finding.detail
        assert "why: the step is broken" in finding.detail
    assert report.exit_code == 1


def test_port_that_segfaults_is_a_crash_finding(tmp_path: Path) -> None:
    bug = "    import ctypes\n    ctypes.string_at(0)"
    toml, port = counter_env(tmp_path, port_bug=bug)
    report = verify(load_spec(toml), port, [0], VerifyOptions())
    [finding] = report.levels[0].findings
    assert report.levels[0].status == "error"
    assert finding.check == "crash" and finding.extra["side"] == "port"
    assert "SIGSEGV" in finding.message
    assert 'File "' in finding.detail  # faulthandler's stack, from the child's stderr


def test_port_that_never_returns_times_out(tmp_path: Path) -> None:
    toml, port = counter_env(tmp_path, port_bug="    while True:\n        pass")
    timeout_s = 4.0
    start = time.monotonic()
    report = verify(load_spec(toml), port, [0, 1, 2, 3], VerifyOptions(timeout_s=timeout_s))
    elapsed = time.monotonic() - start
    [result] = report.levels  # the first level's error stops the run
    assert result.status == "error"
    [finding] = result.findings
    assert finding.check == "timeout"
    assert finding.extra == {"side": "port", "call": "step"}
    assert f"did not return within {timeout_s:g} s (killed)" in finding.message
    # one hung call, killed at the limit (the rest is process start-up and compiling)
    assert elapsed < timeout_s + 60
