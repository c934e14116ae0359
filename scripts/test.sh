#!/usr/bin/env bash
# Builds tpbatch (CPU configuration) and runs the whole test suite through ctest.
# Usage: scripts/test.sh [ctest args...]   (build folder: $BUILD_DIR, default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# mpirun as root (containers, CI) must be allowed explicitly.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -f /dev/shm/vader_segment.* 2>/dev/null || true   # left behind by killed MPI jobs
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "$@"
