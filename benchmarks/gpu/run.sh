#!/usr/bin/env bash
# The GPU run (benchmarks/gpu/gpu_bench.py) on a machine that has only JAX (with CUDA), flax,
# optax and hypothesis: the wheels fetch_wheels.sh put in benchmarks/gpu/wheels/ are installed
# first (no index: the machine may have no network), envforge runs from this source tree.
#   benchmarks/gpu/run.sh [--tiny] [--out DIR] [--skip PART] [--budget-s S]
set -euo pipefail
cd "$(dirname "$0")/../.."
wheels=${ENVFORGE_GPU_WHEELS:-benchmarks/gpu/wheels}
if compgen -G "$wheels/*.whl" >/dev/null; then
  # --no-deps: JAX and its own dependencies are the machine's; the list names everything else
  python -m pip install -q --no-index --no-deps --find-links "$wheels" \
    -r benchmarks/gpu/requirements.txt || echo "gpu run: some carried wheels did not install" >&2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python benchmarks/gpu/gpu_bench.py "$@"
