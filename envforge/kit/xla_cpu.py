"""Cholesky factorizations and triangular solves on XLA:CPU without jaxlib's LAPACK kernels.

Why: jaxlib 0.10 lowers a batched ``cholesky`` (and ``triangular_solve``) on CPU to a LAPACK
custom call that splits the batch over XLA's intra-op thread pool and blocks until the pieces
are done (``jax::ParallelBatchMap``). XLA's executor runs independent operations of one program
concurrently on that same pool, so when as many such calls are in flight as the pool has
threads, every thread is waiting for work queued behind it and the program never finishes.
The pool has one thread per CPU: on a 2-core machine two independent factorizations suffice.
MJX's step has several (mass matrix, Newton solver); seen here as ``envforge verify
halfcheetah`` hanging in L1 with both ``tf_XLAEigen`` threads inside ``ParallelBatchMap``
(gdb), in 1 of 2 runs side by side. jax 0.11.2 drops that parallel path from open-source
builds, but needs Python 3.12.

What this does: registers, for the CPU platform only, lowerings of ``cholesky_p`` and
``triangular_solve_p`` to StableHLO's own ``cholesky`` and ``triangular_solve`` ops, which XLA
expands into ordinary loops (no custom call, no nested waits). It changes the process's
lowering table, so it must run before the functions that use them are first traced, and it
only changes how those two primitives compile (results agree with LAPACK's to rounding).
"""

from __future__ import annotations

from typing import Any


def use_xla_linalg_on_cpu() -> None:
    """Route CPU Cholesky factorizations and triangular solves to XLA's own ops (a second call
    registers the same rules again)."""
    import jax.lax.linalg as linalg
    from jax.extend.mlir.dialects import chlo, stablehlo
    from jax.interpreters import mlir

    def cholesky(ctx: Any, x: Any) -> list[Any]:
        del ctx
        return [stablehlo.cholesky(x, lower=True)]

    def triangular_solve(
        ctx: Any,
        a: Any,
        b: Any,
        *,
        left_side: bool,
        lower: bool,
        transpose_a: bool,
        conjugate_a: bool,
        unit_diagonal: bool,
    ) -> list[Any]:
        del ctx
        if conjugate_a and not transpose_a:
            a = chlo.conj(a)
        transpose = (
            "NO_TRANSPOSE" if not transpose_a else ("ADJOINT" if conjugate_a else "TRANSPOSE")
        )
        out = stablehlo.triangular_solve(
            a, b, left_side, lower, unit_diagonal, stablehlo.TransposeAttr.get(transpose)
        )
        return [out]

    mlir.register_lowering(linalg.cholesky_p, cholesky, platform="cpu")
    mlir.register_lowering(linalg.triangular_solve_p, triangular_solve, platform="cpu")
