#!/usr/bin/env bash
# Download the wheels benchmarks/gpu/run.sh installs on a machine with no network: every
# package in requirements.txt, without dependencies (JAX's are the machine's), for the GPU
# machine's CPython (PYTHON_VERSIONS, default this one's: mujoco's wheel alone is 26 MB a
# version, one version's set 42 MB). benchmarks/gpu/wheels/ is git-ignored; carry it there.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p wheels
default=$(python -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
for version in ${PYTHON_VERSIONS:-$default}; do
  python -m pip download -q --no-deps --only-binary=:all: --dest wheels \
    --python-version "$version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    -r requirements.txt
done
du -sh wheels
