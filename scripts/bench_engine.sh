#!/usr/bin/env bash
# The engine benchmark table (not a test): each workload against its bound measured in the same run,
# and llama.cpp's numbers on the same weights when LLAMA_CPP_BIN names a llama.cpp build folder.
# Usage: [LLAMA_CPP_BIN=/path/to/llama.cpp/build] scripts/bench_engine.sh [BUILD] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
[[ $# -gt 0 && $1 != --* ]] && BUILD=$1
cmake --build "$BUILD" -j "$(nproc)" --target tpbatch tpbatch_machine_bench >/dev/null
exec /usr/bin/python3 scripts/bench_engine.py "$@"
