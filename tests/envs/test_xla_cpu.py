"""envforge/kit/xla_cpu.py: CPU Cholesky and triangular solves lowered to XLA's own ops."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

pytest.importorskip("jax")

# in a child process: the lowering table is process-wide, and this test's must stay jax's own
PROBE = """
import json, re, numpy as np, jax
jax.config.update("jax_enable_x64", True)
def solve(m, v):
    return jax.vmap(lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), b))(m, v)
rng = np.random.default_rng(0)
a = rng.normal(size=(16, 9, 9)); m = a @ a.transpose(0, 2, 1) + 9 * np.eye(9)
v = rng.normal(size=(16, 9))
before = re.findall(r"custom_call @(\\w+)", jax.jit(solve).lower(m, v).as_text())
from envforge.kit.xla_cpu import use_xla_linalg_on_cpu
use_xla_linalg_on_cpu()
use_xla_linalg_on_cpu()
# jit caches a function's lowering: trace a new function after the rules change
fresh = lambda m, v: solve(m, v)
after = re.findall(r"custom_call @(\\w+)", jax.jit(fresh).lower(m, v).as_text())
x = np.asarray(jax.jit(fresh)(m, v))
err = float(np.abs(x - np.linalg.solve(m, v[..., None])[..., 0]).max())
print(json.dumps({"before": before, "after": after, "err": err}))
"""


def test_cpu_cholesky_solves_lower_without_lapack_calls_and_agree_with_numpy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # jax's own CPU lowering calls LAPACK (the kernels whose batch split can deadlock)
    assert any("potrf" in name for name in result["before"]), result
    assert result["after"] == [], result
    assert result["err"] < 1e-12, result
