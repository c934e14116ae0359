#!/usr/bin/env bash
# Builds tpbatch and runs the whole test suite through ctest. Where the CUDA toolkit and NCCL are
# installed (as on the CI machines, which have no GPU) the CUDA backend is compiled and linked too,
# so it never rots; the tests run on the CPU backend and GPU tests skip without a device. Where the
# CUDA headers are, a second build ($BUILD_DIR-emu, TPBATCH_CUDA=EMU) runs the CUDA backend on the
# emulated device (cuemu/): the GPU tests plain and under AddressSanitizer+UBSan and
# ThreadSanitizer, the emulator's own tests and the engine end to end (ctest -L emu); the same
# ctest arguments apply to both builds. TPBATCH_EMU=0 skips that stage.
# Usage: scripts/test.sh [ctest args...]   (build folder: $BUILD_DIR, default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# mpirun as root (containers, CI) must be allowed explicitly.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Start from a clean MPI state: killed jobs leave shared-memory segments and Open MPI session
# directories (/tmp/ompi.<host>.<uid>/) behind, and a later launcher can trip over their files.
if ! pgrep -x 'mpirun|orterun|orted|prterun|prted' >/dev/null 2>&1; then
  rm -f /dev/shm/vader_segment.* 2>/dev/null || true
  rm -rf "${TMPDIR:-/tmp}"/ompi.* "${TMPDIR:-/tmp}"/pmix-* 2>/dev/null || true
fi
CUDA_ARGS=(-DTPBATCH_CUDA="${TPBATCH_CUDA:-AUTO}")
[ -x /usr/local/cuda/bin/nvcc ] && CUDA_ARGS+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${CUDA_ARGS[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
# The libFuzzer targets (clang, ASan/UBSan) are built here, before the tests run, so that the
# bounded fuzzing test only fuzzes: compiling them inside the test made its time depend on load.
CLANGXX=$(command -v clang++ || true)
if [ -n "$CLANGXX" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S fuzz -B "$BUILD_DIR/fuzz-build" -DCMAKE_CXX_COMPILER="$CLANGXX" "${launcher[@]}" >/dev/null &&
    cmake --build "$BUILD_DIR/fuzz-build" -j "$JOBS" >/dev/null ||
    echo "test.sh: the fuzz targets did not build; tests/e2e/test_fuzzers_bounded.sh will say why"
fi
# The emulated device needs only the CUDA headers (cuda_runtime.h, cublas_v2.h, nccl.h).
EMU_BUILD=""
if [ "${TPBATCH_EMU:-1}" != 0 ] && [ -f /usr/local/cuda/include/cuda_runtime.h ] && [ -f /usr/local/cuda/include/nccl.h ]; then
  EMU_BUILD="$BUILD_DIR-emu"
  cmake -S . -B "$EMU_BUILD" -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=EMU >/dev/null
  cmake --build "$EMU_BUILD" -j "$JOBS" --target emu_tests
else
  echo "test.sh: no CUDA headers under /usr/local/cuda (or TPBATCH_EMU=0): the emulated-device stage is skipped"
fi
rc=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" "$@") || rc=$?
if [ -n "$EMU_BUILD" ]; then
  (cd "$EMU_BUILD" && ctest --output-on-failure -j "$JOBS" -L emu "$@") || rc=$?
fi
exit "$rc"
