#!/usr/bin/env bash
# On a GPU machine: build the CUDA configuration, run the kernel tests (each kernel vs its CPU
# twin), then the GPU micro-benchmark; prints its table last. Logs go to $OUT (default out/gpu_check).
# Dependencies missing on the machine (MPI, HDF5, yaml-cpp, ...) can come as extracted .debs:
#   TPBATCH_PREFIX=/path/to/prefix scripts/gpu_check.sh    (a `dpkg -x` root: usr/include, usr/lib/...)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu_check}
BUILD_DIR=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT"

if [[ -n "${TPBATCH_PREFIX:-}" ]]; then
  P=$(cd "$TPBATCH_PREFIX" && pwd)
  LIB=$P/usr/lib/x86_64-linux-gnu
  export PATH=$P/usr/bin:$PATH
  export CPATH=$P/usr/include:$P/usr/include/x86_64-linux-gnu:${CPATH:-}
  export LIBRARY_PATH=$LIB:$LIB/openmpi/lib:${LIBRARY_PATH:-}
  export LD_LIBRARY_PATH=$LIB:$LIB/openmpi/lib:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$LIB/pkgconfig:$P/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
  export OPAL_PREFIX=$LIB/openmpi   # lets the relocated Open MPI wrappers find their files
  export CMAKE_PREFIX_PATH=$P/usr:${CMAKE_PREFIX_PATH:-}
fi

echo "== configure + build ($(nproc) cores)"
SECONDS=0
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target tpbatch_gpu_tests tpbatch_gpu_bench \
  >"$OUT/build.log" 2>&1 || { grep -m20 -E "error|Error" "$OUT/build.log"; exit 1; }
echo "built in ${SECONDS}s"

echo "== kernel tests"
status=0
timeout 300 "$BUILD_DIR/tests/tpbatch_gpu_tests" --gtest_output=xml:"$OUT/gpu_tests.xml" \
  >"$OUT/gpu_tests.log" 2>&1 || status=$?
grep -E "^\[  (FAILED|SKIPPED|PASSED) |^\[==========\]" "$OUT/gpu_tests.log" || true
grep -B2 -A6 "Failure" "$OUT/gpu_tests.log" | head -60 || true

echo "== benchmark"
timeout 240 "$BUILD_DIR/benchmarks/tpbatch_gpu_bench" 2>&1 | tee "$OUT/gpu_bench.log" | tail -8 || status=1
exit $status
