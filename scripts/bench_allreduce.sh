#!/usr/bin/env bash
# Allreduce latency/bandwidth on this machine and the alpha-beta fit `tpbatch plan` uses
# (--alpha-us, --bandwidth-gbs). Usage: scripts/bench_allreduce.sh [BUILD_DIR] [NP] [bench options...]
#   e.g. scripts/bench_allreduce.sh build 2 --max-bytes 16M --iters 50
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
NP=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BENCH="$BUILD/benchmarks/tpbatch_allreduce_bench"
if [ ! -x "$BENCH" ]; then
  cmake --build "$BUILD" --target tpbatch_allreduce_bench
fi
echo "== MPI_Allreduce"
mpirun -np "$NP" --oversubscribe --bind-to none "$BENCH" "$@"
echo
echo "== through MpiCommunicator (the engine's path)"
mpirun -np "$NP" --oversubscribe --bind-to none "$BENCH" --communicator "$@"
