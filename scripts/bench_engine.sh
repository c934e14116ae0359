#!/usr/bin/env bash
# Engine benchmarks (not a test): prefill/decode against measured GEMM peak and bandwidth floor,
# the continuous-batching table, and pipeline micro-batching. Usage: scripts/bench_engine.sh [BUILD] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
cmake --build "$BUILD" -j "$(nproc)" --target tpbatch tpbatch_machine_bench >/dev/null
exec /usr/bin/python3 scripts/bench_engine.py "$@"
