#!/usr/bin/env bash
# The GPU check: one command for a bare GPU machine (docs/cuda.md "GPU check": one H200, CUDA,
# Python with h5py and the pip NCCL wheel, but no MPI/HDF5/yaml-cpp/OpenBLAS/ICU/PCRE2/GTest).
# Run from the repo root with the .debs from scripts/gpu_fetch_debs.sh carried in build-debs/:
#   bash scripts/gpu_check.sh
# It unpacks the .debs into a private prefix (never into /), builds the CUDA configuration, then
# runs and prints ONE table (also $OUT/gpu_check.txt when $OUT is set):
#   build   configure, build time, every binary's libraries resolve (ldd)
#   kernels tpbatch_gpu_tests: each kernel vs its CPU twin, pass/fail and max relative error
#   e2e     stories260K, a generated 125M model in fp32 and bf16: device cuda vs device cpu, greedy
#           tokens and |Δlogprob| within the bf16 bounds (see "How CUDA runs are compared")
#   speed   an 8B-shaped bf16 model: decode step time at batch 1/16/64/256 vs the floor
#           (weight + KV bytes) / measured copy bandwidth; prefill tok/s and TFLOP/s at 2,048-token
#           prompts; a 1,024-row 128/128 throughput run
#   nccl    TP=2 on the one GPU (two ranks, NCCL_HOSTID per rank) vs TP=1, compared as e2e; the NCCL
#           gtests (collectives, pipeline send/recv, the abort path) on two ranks, a row per test
# Every step has a timeout and the whole run a budget (GPU_CHECK_BUDGET_S, 480 s); a failing or
# refused step becomes a row, never the end of the script. Without a GPU the GPU rows say
# "no device" and the CPU halves still run, which is how it is rehearsed on a CPU machine:
#   bash scripts/gpu_fetch_debs.sh build-debs && bash scripts/simulate_bare_gpu_machine.sh bash scripts/gpu_check.sh
# Knobs: GPU_CHECK_DEBS (build-debs), GPU_CHECK_PREFIX (build-gpu-prefix), GPU_CHECK_BUILD (build-gpu),
# GPU_CHECK_WORK (build-gpu-work), GPU_CHECK_JOBS (nproc), GPU_CHECK_BUILD_S (300: the build's limit), GPU_CHECK_SKIP (space-separated parts to
# skip: kernels e2e speed nccl), GPU_CHECK_ASSUME_GPUS=1 (take the GPU paths without a GPU), GPU_CHECK_SPEED_ON_CPU=1 (rehearse the speed/NCCL parts on the CPU
# with a tiny model), GPU_CHECK_BW_GBS (copy bandwidth when gpu_bench cannot measure it),
# GPU_CHECK_EMULATED=1 (build TPBATCH_CUDA=EMU and let the emulated device, cuemu/, answer every GPU
# row: the check's own logic rehearsed end to end without a GPU; tiny models stand in for the 125M
# ones, the slowest attention tests are left out and speed is not measured).
set -uo pipefail
# --env: only unpack the prefix and find NCCL, then print `export` lines for the environment the
# build and tpbatch run in (eval "$(bash scripts/gpu_check.sh --env)"); the rows go to stderr.
ENV_ONLY=0
ROW_FD=1
if [[ "${1:-}" == --env ]]; then
  ENV_ONLY=1
  ROW_FD=2
fi
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
T_START=$SECONDS
BUDGET=${GPU_CHECK_BUDGET_S:-480}
DEBS=${GPU_CHECK_DEBS:-$REPO/build-debs}
P=${GPU_CHECK_PREFIX:-$REPO/build-gpu-prefix}
BUILD=${GPU_CHECK_BUILD:-$REPO/build-gpu}
WORK=${GPU_CHECK_WORK:-$REPO/build-gpu-work}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
SKIP=" ${GPU_CHECK_SKIP:-} "
SPEED_ON_CPU=${GPU_CHECK_SPEED_ON_CPU:-0}
TOOLS=$REPO/scripts/gpu_check_tools.py
LOGS=$WORK/logs
mkdir -p "$WORK" "$LOGS"
TABLE=$WORK/gpu_check.txt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# ---- the table ------------------------------------------------------------------------------------
ROWS=()
CLEANUP=()
write_table() {
  {
    echo "tpbatch GPU check — $(date -u '+%F %T UTC'), ${HOSTNAME:-$(uname -n)}, commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'), $((SECONDS - T_START)) s"
    printf '%s\n' "${ROWS[@]}" | awk -F'|' '
      { for (i = 1; i <= 4; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } }
      END {
        for (i = 1; i <= 4; i++) if (w[i] < 4) w[i] = 4
        printf "%-" w[1] "s  %-" w[2] "s  %-" w[3] "s  %s\n", "part", "check", "result", "detail"
        for (r = 1; r <= NR; r++) printf "%-" w[1] "s  %-" w[2] "s  %-" w[3] "s  %s\n", c[r, 1], c[r, 2], c[r, 3], c[r, 4]
      }'
  } >"$TABLE"
  [[ -n "${OUT:-}" ]] && cp "$TABLE" "$OUT/gpu_check.txt" 2>/dev/null
  return 0
}
# row PART CHECK RESULT DETAIL: one table line, shown at once and kept in the table file (so a
# run killed from outside still leaves the rows it reached).
row() {
  ROWS+=("$1|$2|${3//|//}|${4//|//}")
  echo ">> $1 | $2 | $3 | $4" >&"$ROW_FD"
  write_table
}
left() { echo $((BUDGET - (SECONDS - T_START))); }
# limit WANT: a step's timeout, never past the budget (minus 15 s to print the table).
limit() {
  local l
  l=$(($(left) - 15))
  ((l > $1)) && l=$1
  echo $((l > 0 ? l : 0))
}
skipping() { [[ "$SKIP" == *" $1 "* ]]; }
first_error() { grep -m1 -i -E "error|fail|refus|not found|cannot|abort" "$1" | cut -c1-160; }
log_tail() { tail -n "${2:-5}" "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-200; }

# ---- the prefix: the carried .debs unpacked (dpkg -x), wrappers and alternatives mended ----------
ARCH=x86_64-linux-gnu
HAVE_PREFIX=0
PENV=(env)
PX_PATH=$PATH  # the prefix's PATH (setup_prefix); the system's without .debs
setup_prefix() {
  shopt -s nullglob
  local debs=("$DEBS"/*.deb)
  shopt -u nullglob
  if ((${#debs[@]} == 0)); then
    row build prefix "system" "no .debs in $DEBS: using the system's packages"
    return 0
  fi
  local stamp=$P/.unpacked
  if [[ ! -f "$stamp" || -n "$(find "$DEBS" -name '*.deb' -newer "$stamp" -print -quit)" ]]; then
    rm -rf "$P" && mkdir -p "$P"
    # dpkg -x, or ar + tar where there is no dpkg (a .deb is an ar archive holding data.tar.*).
    printf '%s\0' "${debs[@]}" | xargs -0 -P "$JOBS" -n 4 sh -c '
      for d; do
        if command -v dpkg >/dev/null; then dpkg -x "$d" "$0" || exit 1
        else
          m=$(ar t "$d" | grep "^data.tar") || exit 1
          case "$m" in *.xz) z=-J ;; *.zst) z=--zstd ;; *.gz) z=-z ;; *) z= ;; esac
          ar p "$d" "$m" | tar -x $z -f - -C "$0" || exit 1
        fi
      done' "$P" ||
      { row build prefix FAIL "dpkg -x failed"; return 1; }
    local L=$P/usr/lib/$ARCH
    # What the postinst scripts and update-alternatives would have made.
    for w in mpicc mpicxx mpic++ mpiCC mpirun mpiexec; do
      [[ -e "$P/usr/bin/$w.openmpi" && ! -e "$P/usr/bin/$w" ]] && ln -s "$w.openmpi" "$P/usr/bin/$w"
    done
    for f in libopenblas.so libopenblas.so.0 libblas.so libblas.so.3 liblapack.so liblapack.so.3; do
      [[ -e "$L/openblas-pthread/$f" && ! -e "$L/$f" ]] && ln -s "openblas-pthread/$f" "$L/$f"
    done
    mkdir -p "$P/usr/include/$ARCH"
    for f in cblas.h f77blas.h openblas_config.h; do
      [[ -e "$P/usr/include/$ARCH/openblas-pthread/$f" && ! -e "$P/usr/include/$ARCH/$f" ]] &&
        ln -s "openblas-pthread/$f" "$P/usr/include/$ARCH/$f"
    done
    [[ -e "$L/pkgconfig/hdf5-serial.pc" && ! -e "$L/pkgconfig/hdf5.pc" ]] && ln -s hdf5-serial.pc "$L/pkgconfig/hdf5.pc"
    # Text files that name /usr: the HDF5 compiler wrappers and the pkg-config files.
    sed -i "s#^prefix=\"/usr\"#prefix=\"$P/usr\"#" "$P"/usr/bin/h5cc "$P"/usr/bin/h5c++ 2>/dev/null
    find "$P" -name '*.pc' -type f -exec sed -i -E "s#^([A-Za-z_]+ *= *)/usr#\1$P/usr#" {} +
    touch "$stamp"
  fi
  local L=$P/usr/lib/$ARCH
  HAVE_PREFIX=1
  PX_PATH=$P/usr/bin:$PATH
  PX_LD=$L:$L/openblas-pthread:$L/hdf5/serial:$L/openmpi/lib:$P/lib/$ARCH${NCCL_LIBDIR:+:$NCCL_LIBDIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # The environment of every build and tpbatch command (kept out of the script's own tools, which
  # must not load the prefix's libraries in place of the machine's).
  PENV=(env "PATH=$PX_PATH" "LD_LIBRARY_PATH=$PX_LD" "OPAL_PREFIX=$P/usr" "PMIX_INSTALL_PREFIX=$P/usr/lib/$ARCH/pmix2"
    "CPATH=$P/usr/include:$P/usr/include/$ARCH" "LIBRARY_PATH=$L:$L/openblas-pthread:$P/lib/$ARCH"
    "PKG_CONFIG_PATH=$L/pkgconfig:$P/usr/share/pkgconfig" "PKG_CONFIG_LIBDIR=$L/pkgconfig:$P/usr/share/pkgconfig"
    "CMAKE_PREFIX_PATH=$P/usr" "HDF5_ROOT=$L/hdf5/serial")
  row build prefix ok "${#debs[@]} .debs unpacked into $P ($(du -sm "$P" | cut -f1) MB)"
}
px() { "${PENV[@]}" "$@"; }

# ---- NCCL: the pip wheel's layout (nvidia/nccl/{include,lib/libnccl.so.2}) or a CUDA-prefix copy ---
find_nccl() {
  NCCL_INC=${NCCL_INCLUDE_DIR:-}
  NCCL_LIB=${NCCL_LIBRARY:-}
  [[ -n "$NCCL_INC" && -n "$NCCL_LIB" ]] && return 0
  local py roots=() r
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    while IFS= read -r r; do roots+=("$r"); done < <(timeout 20 "$py" -c '
import site, sys
paths = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
try:
    import nvidia.nccl as n
    paths = list(getattr(n, "__path__", [])) + paths
except Exception:
    pass
print("\n".join(p for p in paths if p))' 2>/dev/null)
  done
  roots+=(/usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages /usr/local/cuda /usr/local/cuda/targets/x86_64-linux)
  for r in "${roots[@]}"; do
    for d in "$r" "$r/nvidia/nccl"; do
      if [[ -f "$d/include/nccl.h" ]]; then
        for l in "$d/lib/libnccl.so" "$d/lib/libnccl.so.2" "$d/lib64/libnccl.so" "$d/lib64/libnccl.so.2"; do
          if [[ -f "$l" ]]; then
            NCCL_INC=$d/include
            NCCL_LIB=$l
            return 0
          fi
        done
      fi
    done
  done
  return 1
}

# ---- 0. the machine ------------------------------------------------------------------------------
echo "== gpu_check: $(nproc) cores, budget ${BUDGET}s, work in $WORK" >&"$ROW_FD"
GPUS=0
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$LOGS/nvidia-smi.txt" 2>&1 &&
    GPUS=$(grep -c . "$LOGS/nvidia-smi.txt")
fi
EMULATED=${GPU_CHECK_EMULATED:-0}
if [[ "$EMULATED" == 1 ]]; then
  GPUS=1
  export CUEMU_DEVICES=1
  row machine gpu "emulated" "GPU_CHECK_EMULATED: the CUDA backend on the emulated device (cuemu/); $(nproc) cores"
elif [[ -n "${GPU_CHECK_ASSUME_GPUS:-}" ]]; then
  # Rehearsal of the GPU code paths on a CPU machine: every CUDA step then fails with the binary's
  # own message, which is what a first GPU run with a broken CUDA path would show.
  GPUS=$GPU_CHECK_ASSUME_GPUS
  row machine gpu "assumed $GPUS" "GPU_CHECK_ASSUME_GPUS: nvidia-smi not asked"
elif ((GPUS > 0)); then
  row machine gpu "$GPUS GPU(s)" "$(head -1 "$LOGS/nvidia-smi.txt"); $(nproc) cores"
else
  row machine gpu "no device" "nvidia-smi finds no GPU ($(log_tail "$LOGS/nvidia-smi.txt" 1)); $(nproc) cores"
fi
# The carried Debian 12 libraries need glibc >= 2.36 (libevent's arc4random) and a libstdc++ with
# GLIBCXX_3.4.30 (GCC 12, for ICU): an older machine fails at load time, so say so first.
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
stdcxx=$(c++ -print-file-name=libstdc++.so.6 2>/dev/null)
stdcxx_ok=no
[[ -f "$stdcxx" ]] && grep -a -q GLIBCXX_3.4.30 "$(readlink -f "$stdcxx")" && stdcxx_ok=yes
if python3 -c "import sys; sys.exit(0 if tuple(map(int, '${glibc:-0}'.split('.'))) >= (2, 36) else 1)" 2>/dev/null &&
  [[ "$stdcxx_ok" == yes ]]; then
  row machine "glibc, libstdc++" ok "glibc $glibc, GLIBCXX_3.4.30 present; $(c++ --version 2>/dev/null | head -1)"
else
  row machine "glibc, libstdc++" "too old?" "glibc ${glibc:-?} (need >= 2.36), GLIBCXX_3.4.30 $stdcxx_ok: the carried Debian 12 libraries may not load"
fi
NVCC=${CUDACXX:-}
[[ -z "$NVCC" ]] && NVCC=$(command -v nvcc || true)
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
if [[ -z "$NVCC" && "$EMULATED" != 1 ]] && ((!ENV_ONLY)); then
  row build nvcc FAIL "no nvcc (PATH, CUDACXX, /usr/local/cuda/bin)"
  exit 1
fi

# ---- 1. prefix, NCCL, configure, build -----------------------------------------------------------
SECONDS_PREFIX=$SECONDS
if find_nccl; then
  NCCL_LIBDIR=$(dirname "$NCCL_LIB")
  row build nccl found "$NCCL_LIB"
else
  NCCL_LIBDIR=""
  row build nccl FAIL "no nccl.h + libnccl.so[.2] in site-packages/nvidia/nccl or /usr/local/cuda (set NCCL_INCLUDE_DIR, NCCL_LIBRARY)"
fi
setup_prefix || exit 1
if ((ENV_ONLY)); then
  for kv in "${PENV[@]:1}"; do printf 'export %q\n' "$kv"; done
  exit 0
fi
echo "   prefix ready in $((SECONDS - SECONDS_PREFIX)) s"

cmake_args=(-S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  "-DCMAKE_CUDA_COMPILER=$NVCC")
[[ "$EMULATED" == 1 ]] && cmake_args=(-S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=EMU)
command -v ninja >/dev/null && [[ ! -f "$BUILD/CMakeCache.txt" || -f "$BUILD/build.ninja" ]] && cmake_args+=(-G Ninja)
[[ -n "$NCCL_INC" ]] && cmake_args+=("-DNCCL_INCLUDE_DIR=$NCCL_INC" "-DNCCL_LIBRARY=$NCCL_LIB" "-DCUEMU_NCCL_INCLUDE_DIR=$NCCL_INC")
if ((HAVE_PREFIX)); then
  cmake_args+=("-DMPI_CXX_COMPILER=$P/usr/bin/mpicxx.openmpi" "-DMPI_C_COMPILER=$P/usr/bin/mpicc.openmpi"
    "-DCBLAS_INCLUDE_DIR=$P/usr/include/$ARCH/openblas-pthread"
    "-DPKG_CONFIG_EXECUTABLE=$P/usr/bin/pkgconf"
    # Not the h5cc wrapper: it links -lsz -lcurl -lcrypto -lz, whose -dev packages are not carried;
    # libhdf5.so alone links (its own dependencies resolve through LD_LIBRARY_PATH).
    "-DHDF5_C_COMPILER_EXECUTABLE=")
fi
if command -v ccache >/dev/null && [[ "${CCACHE_DISABLE:-}" != 1 ]]; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
t0=$SECONDS
if ! timeout "$(limit 120)" "${PENV[@]}" cmake "${cmake_args[@]}" >"$LOGS/configure.log" 2>&1; then
  row build configure FAIL "$(grep -m2 -A2 'CMake Error' "$LOGS/configure.log" | tr '\n' ' ' | cut -c1-240)"
  exit 1
fi
row build configure ok "$((SECONDS - t0)) s; $(grep -m1 'CUDA backend:' "$LOGS/configure.log" | sed 's/^-- //' | cut -c1-150)"
TARGETS=(tpbatch tpbatch_gpu_tests tpbatch_gpu_bench)
t0=$SECONDS
# ninja_cost: the summed and the longest compile step of the build (each output's longest entry in
# .ninja_log, so a step ccache answered still counts its first, real compile), for scaling to N cores.
ninja_cost() {
  [[ -f "$BUILD/.ninja_log" ]] || return 0
  awk -F'\t' '!/^#/ { d = ($2 - $1) / 1000; if (d > m[$4]) m[$4] = d }
    END { for (o in m) { s += m[o]; if (m[o] > x) x = m[o] }; printf "compile steps %.0f s summed, longest %.0f s", s, x }' "$BUILD/.ninja_log"
}
# children_cpu: user+sys seconds of every finished child so far (bash's `times`).
children_cpu() {
  times | tail -1 | awk '{ for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } } END { printf "%.0f", t }'
}
cpu0=$(children_cpu)
rc=0
timeout "$(limit "${GPU_CHECK_BUILD_S:-300}")" "${PENV[@]}" cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" >"$LOGS/build.log" 2>&1 || rc=$?
if ((rc != 0)); then
  why=$(grep -m1 -E 'error|Error' "$LOGS/build.log" | cut -c1-200)
  ((rc == 124)) && why="timed out ($(grep -o -E '^\[[0-9]+/[0-9]+\]' "$LOGS/build.log" | tail -1) steps)"
  row build compile FAIL "after $((SECONDS - t0)) s: $why; $(ninja_cost)"
  exit 1
fi
row build compile ok "$((SECONDS - t0)) s with -j$JOBS, $(($(children_cpu) - cpu0)) s CPU (${TARGETS[*]}); $(ninja_cost)"
TPBATCH=$BUILD/tpbatch
GPU_TESTS=$BUILD/tests/tpbatch_gpu_tests
GPU_BENCH=$BUILD/benchmarks/tpbatch_gpu_bench
missing=""
for b in "$TPBATCH" "$GPU_TESTS" "$GPU_BENCH" "$(PATH=$PX_PATH command -v mpirun)" "$(PATH=$PX_PATH command -v orted)"; do
  [[ -n "$b" && -x "$b" ]] || { missing+=" (binary ${b:-mpirun/orted} absent)"; continue; }
  m=$(px ldd "$b" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
  [[ -n "$m" ]] && missing+=" $(basename "$b"): $m"
done
if [[ -z "$missing" ]]; then
  row build ldd ok "every library of tpbatch, the GPU tests, the GPU bench, mpirun and orted resolves"
else
  row build ldd FAIL "$missing"
fi

# ---- 2. kernels: each CUDA kernel vs its CPU twin ------------------------------------------------
if ! skipping kernels; then
  rm -f "$WORK/gpu_tests.xml"
  rc=0
  # The NCCL tests need two ranks: the nccl part runs them. The emulated device runs a kernel test
  # a few thousand times slower than a GPU: there the long attention cases are left out.
  filter='-Nccl*'
  [[ "$EMULATED" == 1 ]] && filter='-Nccl*:*PrefillChunks*:*DecodeBatch*:*MixedSteps*:*GroupShapes*' &&
    row kernels "4 attention tests" "left out" "emulated: PrefillChunks, DecodeBatch*, MixedSteps, GroupShapes (ctest -L emu runs them)"
  timeout "$(limit 150)" "${PENV[@]}" "$GPU_TESTS" --gtest_filter="$filter" --gtest_output="xml:$WORK/gpu_tests.xml" \
    >"$LOGS/gpu_tests.log" 2>&1 || rc=$?
  if [[ ! -f "$WORK/gpu_tests.xml" ]]; then
    row kernels tpbatch_gpu_tests FAIL "exit $rc, no XML: $(log_tail "$LOGS/gpu_tests.log" 3)"
  else
    python3 "$TOOLS" gtest "$WORK/gpu_tests.xml" >"$WORK/gpu_tests.rows"
    n=$(grep -c . "$WORK/gpu_tests.rows")
    nskip=$(grep -c '|skipped|' "$WORK/gpu_tests.rows")
    if ((n > 0 && nskip == n)); then
      row kernels "$n kernel tests" "no device" "all skipped: $(grep -m1 -o 'no CUDA device[^]]*' "$LOGS/gpu_tests.log" || echo skipped)"
    else
      while IFS='|' read -r name status err secs; do
        row kernels "${name#*.}" "$status" "max rel err $err; ${secs} s"
      done <"$WORK/gpu_tests.rows"
      ((rc == 124)) && row kernels tpbatch_gpu_tests FAIL "timed out"
    fi
  fi
fi

# ---- the GPU micro-benchmark: copy bandwidth (the floor's denominator) ----------------------------
BW_GBS=${GPU_CHECK_BW_GBS:-}
if ((GPUS > 0)) && [[ "$EMULATED" != 1 ]] && ! skipping speed; then
  rc=0
  timeout "$(limit 90)" "${PENV[@]}" "$GPU_BENCH" >"$LOGS/gpu_bench.log" 2>&1 || rc=$?
  bw=$(sed -n 's/^copy: \([0-9.]*\) GB\/s.*/\1/p' "$LOGS/gpu_bench.log" | head -1)
  if [[ -n "$bw" ]]; then
    BW_GBS=$bw
    row speed "copy bandwidth" "$bw GB/s" "device-to-device copy timed by CUDA events, read+write (tpbatch_gpu_bench; its table in logs/gpu_bench.log)"
    gemm=$(grep -m1 "prefill GEMM bf16" "$LOGS/gpu_bench.log" | grep -o -E '[0-9.]+ TF/s')
    [[ -n "$gemm" ]] && row speed "cuBLAS bf16 GEMM 4096x14336x4096" "$gemm" "tpbatch_gpu_bench (the prefill ceiling)"
    # Quantized decode projections and the mask kernel (tpbatch_gpu_bench's sections 5 and 6).
    while IFS= read -r l; do
      read -r fmt batch ms rest <<<"$(sed -E 's/^decode projections (.*[^ ]) +batch ([0-9]+) +\(ms\) +([0-9.]+) +(.*)$/\1|\2|\3|\4/' <<<"$l" | tr ' |' '_ ')"
      row speed "8B decode projections ${fmt//_/ }, batch $batch" "$ms ms" "${rest//_/ } (tpbatch_gpu_bench)"
    done < <(grep '^decode projections' "$LOGS/gpu_bench.log")
    mask=$(grep -m1 '^mask_logits' "$LOGS/gpu_bench.log")
    [[ -n "$mask" ]] && row speed "mask_logits 256 rows x 128256" "$(awk '{print $(NF-4), "us"}' <<<"$mask")" "$(awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}' <<<"$mask") (tpbatch_gpu_bench)"
  elif ((rc == 77)); then
    row speed "copy bandwidth" "no device" "tpbatch_gpu_bench: $(log_tail "$LOGS/gpu_bench.log" 1)"
  else
    row speed "copy bandwidth" FAIL "gpu_bench exit $rc: $(log_tail "$LOGS/gpu_bench.log" 2)"
  fi
fi

# ---- running jobs --------------------------------------------------------------------------------
# The Python that reads the results: the machine's own (pip h5py bundles its HDF5), else one whose
# h5py loads the prefix's libhdf5 (Debian's python3-h5py, in the rehearsal).
PY_H5=()
for with_prefix in 0 1; do
  for py in python3 /usr/bin/python3; do
    cmd=("$py")
    ((with_prefix)) && cmd=("${PENV[@]}" "$py")
    if timeout 30 "${cmd[@]}" -c 'import h5py, numpy' >/dev/null 2>&1; then
      PY_H5=("${cmd[@]}")
      break 2
    fi
  done
done
((${#PY_H5[@]})) || row e2e "h5py" FAIL "no python3 with h5py and numpy: comparisons cannot run"

# ---- How CUDA runs are compared -------------------------------------------------------------------
# The CUDA backend computes with bf16 activations (8 significant bits: each store rounds a value by
# up to 2^-9 of it), a bf16 KV cache and, for fp32 weights, TF32 GEMMs (11 bits: small beside bf16).
# Every activation buffer is bf16, the residual stream included: ~10 roundings a layer, which
# through a model's layers move logits by hundredths to tenths, and flip greedy tokens whose top two
# are that close. Re-computing this check's rows and others like them in float64 with those
# roundings (bf16 wherever the backend stores, TF32 weights) moved greedy logprobs by median 0.045
# and at most 0.23 on the generated 125M models (fp32 and bf16 weights, 3 x 256 tokens; their top-2
# gaps average ~0.9) and by at most 0.20 on stories260K (1,536 tokens), and flipped the greedy token
# at 51 positions, all where the reference's top-2 gap was below 0.26. So, with about twice that
# room: |Δlogprob| <= CMP_TOL over each row's common prefix of greedy tokens, and a row may diverge
# only at a near tie, where the two tokens' logprobs under the reference are within CMP_NEAR_TIE
# (the reference run records its top CMP_TOPK logprobs per token for this). A wiring error (a wrong
# layout, position or residual) moves logprobs by far more, from the first tokens on. TP=2 against
# TP=1, both CUDA, differ only by the order of fp32 sums and the allreduce's bf16 partial sums, a
# smaller perturbation than bf16 against fp32: the same bounds hold.
CMP_TOL=0.5
CMP_NEAR_TIE=0.5
# More compare options for one model: int8 W8A8 rounds each layer's input to int8 from bf16 on
# the device and from fp32 on the CPU, so a few positions may exceed the tolerance (--outliers).
CMP_EXTRA=()
CMP_TOPK=4
# compare A.h5 B.h5 LOG -> "VERDICT ROWS_SAME ROWS NEAR_TIES TOKENS_COMMON TOKENS MAX_D FIRST_DIFF" or
# empty; A is the run under test, B the reference; why rows diverge goes to LOG.
compare() {
  ((${#PY_H5[@]})) && timeout 60 "${PY_H5[@]}" "$TOOLS" compare "$1" "$2" --tol "$CMP_TOL" --near-tie "$CMP_NEAR_TIE" "${CMP_EXTRA[@]}" 2>"$3"
}
# cmp_detail "LINE" LOG: compare's line in words, and on a failure the first reason from LOG.
cmp_detail() {
  local v rs rn ties tc tt md first why=""
  read -r v rs rn ties tc tt md first <<<"$1"
  [[ "$v" != pass ]] && why="; $(grep -m1 -E 'diverges|differ|failed' "$2" | cut -c1-160 | grep . || echo "logprobs beyond the tolerance")"
  echo "rows $rs/$rn identical, $ties more up to a near tie (<= $CMP_NEAR_TIE); tokens $tc/$tt before any divergence; max abs Δlogprob $md (tol $CMP_TOL); first diff $first$why"
}

# write_job FILE MODEL INPUT OUTPUT DEVICE [YAML lines...]
write_job() {
  local file=$1 model=$2 input=$3 output=$4 device=$5
  shift 5
  {
    echo "model: $model"
    echo "device: $device"
    echo "input:"
    echo "  path: $input"
    echo "  tokens_field: tokens"
    echo "output:"
    echo "  path: $output"
    echo "  if_exists: overwrite"
    printf '%s\n' "$@"
  } >"$file"
}
# Ranks that share the one GPU: one NCCL "host" per rank (sockets over loopback), and the engine
# told that this sharing is meant (it refuses one GPU for two TP ranks otherwise). Run as
#   "${PENV[@]}" "${MPIRUN_SHARED_GPU[@]}" -np N bash -c "$RANK_SHELL" XML_PREFIX|- COMMAND ARGS...
# where an XML_PREFIX gives each rank its gtest report XML_PREFIX-rankR.xml.
MPIRUN_SHARED_GPU=(mpirun --bind-to none -x PATH -x LD_LIBRARY_PATH -x OPAL_PREFIX
  -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1 -x NCCL_DEBUG=WARN -x TPBATCH_ALLOW_SHARED_GPU=1)
# shellcheck disable=SC2016 # expanded by each rank's shell
RANK_SHELL='export NCCL_HOSTID=gpucheck-rank$OMPI_COMM_WORLD_RANK
[ "$0" = - ] || export GTEST_OUTPUT="xml:$0-rank$OMPI_COMM_WORLD_RANK.xml"
exec "$@"'
# run_job NAME SECONDS NP JOB: runs tpbatch (under mpirun when NP > 1); log in logs/NAME.log.
run_job() {
  local name=$1 secs=$2 np=$3 job=$4 t
  t=$(limit "$secs")
  ((t < 5)) && { echo "out of time" >"$LOGS/$name.log"; return 124; }
  if ((np == 1)); then
    timeout -k 5 "$t" "${PENV[@]}" "$TPBATCH" "$job" >"$LOGS/$name.log" 2>&1
  else
    timeout -k 5 "$t" "${PENV[@]}" "${MPIRUN_SHARED_GPU[@]}" -np "$np" bash -c "$RANK_SHELL" - "$TPBATCH" "$job" \
      >"$LOGS/$name.log" 2>&1
  fi
}
# why_not NAME RC: the result column of a run that did not succeed ("refused: ..." or "FAIL").
why_not() {
  local name=$1 rc=$2 msg
  msg=$(grep -m1 -E "tpbatch: error|error:" "$LOGS/$name.log" | sed 's/^.*error: //' | cut -c1-150)
  if ((rc == 124 || rc == 137)); then
    echo "FAIL|timed out ($(log_tail "$LOGS/$name.log" 1))"
  elif grep -q -i -E "not run on the CUDA backend|without the CUDA backend|cuda.*(refus|not supported|not yet)|same GPU|share.* GPU|one GPU" <<<"$msg"; then
    echo "refused|$msg"
  else
    echo "FAIL|exit $rc: ${msg:-$(log_tail "$LOGS/$name.log" 2)}"
  fi
}
inspect_field() {  # inspect_field RESULTS.h5 KEY -> the rest of inspect's line for KEY
  px "$TPBATCH" inspect "$1" 2>/dev/null | sed -n "s/^$2  *//p" | head -1
}
make_model() {  # make_model DIR SECONDS ARGS...: reuses DIR when its config is the same
  local dir=$1 secs=$2
  shift 2
  local want="$*"
  if [[ -f "$dir/model.safetensors" && "$(cat "$dir/.args" 2>/dev/null)" == "$want" ]]; then return 0; fi
  rm -rf "$dir"
  timeout "$(limit "$secs")" "${PENV[@]}" "$TPBATCH" make-model "$dir" "$@" >"$LOGS/make-model-$(basename "$dir").log" 2>&1 &&
    echo "$want" >"$dir/.args"
}

# e2e_pair LABEL MODEL ROWS PROMPT NEW [YAML lines]: the CUDA run, then the CPU run (the reference,
# with its top logprobs), compared.
e2e_pair() {
  local label=$1 model=$2 rows=$3 plen=$4 new=$5
  shift 5
  local tag=${label// /_} vocab
  vocab=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$model/config.json")
  python3 "$TOOLS" prompts "$WORK/$tag.jsonl" "$rows" "$plen" "$vocab" 1
  local sampling=("sampling:" "  max_new_tokens: $new" "  temperature: 0.0" "  ignore_eos: true")
  write_job "$WORK/$tag-cpu.yaml" "$model" "$WORK/$tag.jsonl" "$WORK/$tag-cpu.h5" cpu "${sampling[@]}" \
    "  top_logprobs: $CMP_TOPK" "$@"
  write_job "$WORK/$tag-cuda.yaml" "$model" "$WORK/$tag.jsonl" "$WORK/$tag-cuda.h5" cuda "${sampling[@]}" "$@"
  local rc=0 t0=$SECONDS cuda_s=0
  if ((GPUS > 0)); then
    # The CUDA run first: when it is refused or fails, the CPU twin is not worth the device's time.
    run_job "$tag-cuda" 120 1 "$WORK/$tag-cuda.yaml" || rc=$?
    if ((rc != 0)); then
      IFS='|' read -r res det <<<"$(why_not "$tag-cuda" $rc)"
      row e2e "$label cuda vs cpu" "$res" "$det"
      [[ "$res" == refused ]] && CUDA_REFUSED=$det
      return
    fi
    cuda_s=$((SECONDS - t0))
  fi
  rc=0
  t0=$SECONDS
  run_job "$tag-cpu" 120 1 "$WORK/$tag-cpu.yaml" || rc=$?
  if ((rc != 0)); then
    IFS='|' read -r res det <<<"$(why_not "$tag-cpu" $rc)"
    row e2e "$label cpu" "$res" "$det"
    return
  fi
  local cpu_s=$((SECONDS - t0))
  if ((GPUS == 0)); then
    # Without a device: the CPU run is checked against itself once more (the comparison's plumbing).
    local self
    self=$(compare "$WORK/$tag-cpu.h5" "$WORK/$tag-cpu.h5" "$LOGS/compare-$tag.log")
    [[ -n "$self" ]] && self="${self%% *}: $(cmp_detail "$self" "$LOGS/compare-$tag.log")"
    row e2e "$label" "no device" "cpu run ok in ${cpu_s} s ($(inspect_field "$WORK/$tag-cpu.h5" tokens)); the comparison on cpu vs itself: ${self:-unavailable}"
    return
  fi
  local r
  r=$(compare "$WORK/$tag-cuda.h5" "$WORK/$tag-cpu.h5" "$LOGS/compare-$tag.log")
  if [[ -z "$r" ]]; then
    row e2e "$label cuda vs cpu" FAIL "comparison failed: $(tail -2 "$LOGS/compare-$tag.log" | tr '\n' ' ')"
    return
  fi
  row e2e "$label cuda vs cpu" "${r%% *}" "$(cmp_detail "$r" "$LOGS/compare-$tag.log"); cuda ${cuda_s} s, cpu ${cpu_s} s"
}

# ---- 3. end to end: CUDA vs the CPU backend ------------------------------------------------------
CUDA_REFUSED=""  # the binary's message when it refuses device: cuda (the speed part then does not start)
M125=$WORK/models/m125-f32
M125BF=$WORK/models/m125-bf16
PRESET125=125m
LABEL125=125M
if [[ "$EMULATED" == 1 ]]; then  # a 125M model on the emulated device would take hours
  M125=$WORK/models/tiny-f32
  M125BF=$WORK/models/tiny-bf16
  PRESET125=tiny
  LABEL125="tiny (emulated)"
fi
if ! skipping e2e; then
  STORIES=""
  [[ -f "$REPO/models/stories260K/model.safetensors" ]] && STORIES=$(cd "$REPO/models/stories260K" && pwd)
  if [[ -z "$STORIES" ]]; then
    make_model "$WORK/models/tiny" 60 --preset tiny && STORIES=$WORK/models/tiny
    row e2e stories260K absent "models/stories260K missing: a generated tiny model stands in"
  fi
  [[ -n "$STORIES" ]] && e2e_pair "stories260K fp32" "$STORIES" 8 16 64 "dtype: float32"
  if make_model "$M125" 120 --preset "$PRESET125" --dtype float32; then
    e2e_pair "$LABEL125 fp32" "$M125" 8 32 32 "dtype: float32"
  else
    row e2e "$LABEL125 fp32" FAIL "make-model: $(log_tail "$LOGS/make-model-$(basename "$M125").log" 2)"
  fi
  if make_model "$M125BF" 120 --preset "$PRESET125" --dtype bfloat16; then
    e2e_pair "$LABEL125 bf16" "$M125BF" 8 32 32 "dtype: bfloat16"
  else
    row e2e "$LABEL125 bf16" FAIL "make-model: $(log_tail "$LOGS/make-model-$(basename "$M125BF").log" 2)"
  fi
  # Quantized checkpoints stay quantized on the device: decode takes the in-register GEMV
  # (kernels/quantized_gemv.cu), prefill the bf16 slices + cuBLAS; int8 W8A8 its own kernels
  # (kernels/int8_gemm.cu).
  qshape=(--preset 125m)
  # The tiny preset's widths are no multiples of the 4-bit group (128): a small model that has them.
  [[ "$EMULATED" == 1 ]] && qshape=(--hidden-size 256 --intermediate-size 640 --layers 2 --heads 8 --kv-heads 4
    --head-dim 32 --vocab-size 500)
  for q in fp8-block awq int8; do
    mq=$WORK/models/$PRESET125-$q
    if make_model "$mq" 120 "${qshape[@]}" --quantize "$q"; then
      [[ "$q" == int8 ]] && CMP_EXTRA=(--outliers 0.05)
      e2e_pair "$LABEL125 $q" "$mq" 8 32 32
      CMP_EXTRA=()
      kept=$(grep -m1 -o -E 'linear layers [A-Z0-9_]+' "$LOGS/${LABEL125// /_}_$q-cuda.log")
      [[ -n "$kept" ]] && row e2e "$LABEL125 $q weights on the device" "${kept##* }" "the CUDA run's start-up line"
    else
      row e2e "$LABEL125 $q" FAIL "make-model: $(log_tail "$LOGS/make-model-$(basename "$mq").log" 2)"
    fi
  done
  # Constrained rows masked on the device (kernels/mask_logits.cu): throughput constrained / free,
  # the host's mask time per step, and every row its schema ended checked against the schema.
  if ((GPUS > 0)); then
    guided_args=(125m 256 128)
    [[ "$EMULATED" == 1 ]] && guided_args=("$REPO/models/stories260K" 4 160)
    rc=0
    timeout -k 5 "$(limit 120)" "${PENV[@]}" TPBATCH="$TPBATCH" TPBATCH_DEVICE=cuda PYTHON="env -u LD_LIBRARY_PATH python3" \
      bash "$REPO/benchmarks/guided_throughput.sh" "${guided_args[@]}" >"$LOGS/guided.log" 2>&1 || rc=$?
    ratio=$(sed -n 's/^constrained \/ free = \([0-9.]*\).*/\1/p' "$LOGS/guided.log")
    valid=$(grep -m1 -o 'schema-valid: .*' "$LOGS/guided.log")
    mask=$(grep -m1 -o 'mask time [0-9.]* ms per step, [0-9.]* us per choice' "$LOGS/guided.log")
    if ((rc == 0)) && [[ -n "$ratio" ]]; then
      row e2e "guided ${guided_args[*]} cuda" "$ratio" "constrained / free output tok/s ($(grep -m1 -o 'free [0-9.]* output tok/s, constrained [0-9.]* output tok/s' "$LOGS/guided.log")); $mask; $valid"
    else
      row e2e "guided ${guided_args[*]} cuda" FAIL "exit $rc: ${valid:-$(log_tail "$LOGS/guided.log" 2)}"
    fi
  fi
fi

# ---- 4. NCCL: TP=2 on the one GPU vs TP=1 --------------------------------------------------------
if ! skipping nccl; then
  dev=cuda
  if ((GPUS == 0)); then dev=cpu; fi
  model=$M125
  [[ -f "$model/model.safetensors" ]] || make_model "$model" 120 --preset "$PRESET125" --dtype float32
  python3 "$TOOLS" prompts "$WORK/tp.jsonl" 4 32 "$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$model/config.json")" 3
  sampling=("sampling:" "  max_new_tokens: 32" "  temperature: 0.0" "  ignore_eos: true")
  common=("dtype: float32" "engine:" "  kv_cache_tokens: 16384")  # a fixed KV cache: the two ranks share the GPU's memory
  # TP=1 is the reference: its top logprobs judge near ties.
  write_job "$WORK/tp1.yaml" "$model" "$WORK/tp.jsonl" "$WORK/tp1.h5" "$dev" "${sampling[@]}" "  top_logprobs: $CMP_TOPK" \
    "${common[@]}"
  write_job "$WORK/tp2.yaml" "$model" "$WORK/tp.jsonl" "$WORK/tp2.h5" "$dev" "${sampling[@]}" "${common[@]}" \
    "parallel:" "  tensor: 2"
  label="TP=2 (2 ranks, 1 GPU, NCCL_HOSTID per rank) vs TP=1"
  [[ "$dev" == cpu ]] && label="TP=2 via mpirun on cpu (MPI plumbing) vs TP=1"
  rc=0
  run_job tp1 90 1 "$WORK/tp1.yaml" || rc=$?
  if ((rc != 0)); then
    IFS='|' read -r res det <<<"$(why_not tp1 $rc)"
    row nccl "TP=1 $dev" "$res" "$det"
  else
    rc=0
    run_job tp2 120 2 "$WORK/tp2.yaml" || rc=$?
    if ((rc != 0)); then
      IFS='|' read -r res det <<<"$(why_not tp2 $rc)"
      row nccl "$label" "$res" "$det"
    else
      r=$(compare "$WORK/tp2.h5" "$WORK/tp1.h5" "$LOGS/compare-tp.log")
      if [[ -z "$r" ]]; then
        row nccl "$label" FAIL "comparison failed: $(tail -2 "$LOGS/compare-tp.log" | tr '\n' ' ')"
      else
        row nccl "$label" "${r%% *}" "$(cmp_detail "$r" "$LOGS/compare-tp.log"); $(grep -m1 -o 'tensor-parallel allreduce: [0-9]* calls' "$LOGS/tp2.log")"
      fi
    fi
  fi
  # The NCCL gtests on two ranks: the collectives and pipeline send/recv in one run, then each abort
  # test in a run of its own (each leaves a communicator aborted; one that hangs costs only itself).
  rm -f "$WORK"/nccl-*-rank*.xml
  for filter in 'Nccl.*' NcclAbort.AbortEndsAPendingReceiveAndTheStreamDrains \
    NcclAbort.PeerGoneDuringAWaitAbortsTheCommunicatorsAndThrows; do
    name=nccl-${filter%%.*}-${filter#*.}
    name=${name//\*/all}
    t=$(limit 60)
    if ((t < 5)); then
      row nccl "$filter (2 ranks)" FAIL "out of time"
      continue
    fi
    rc=0
    timeout -k 5 "$t" "${PENV[@]}" "${MPIRUN_SHARED_GPU[@]}" -np 2 bash -c "$RANK_SHELL" "$WORK/$name" \
      "$GPU_TESTS" --gtest_filter="$filter" >"$LOGS/$name.log" 2>&1 || rc=$?
    if [[ ! -f "$WORK/$name-rank0.xml" || ! -f "$WORK/$name-rank1.xml" ]]; then
      why="exit $rc"
      ((rc == 124 || rc == 137)) && why="timed out after $t s"
      row nccl "$filter (2 ranks)" FAIL "$why, no report from both ranks: $(log_tail "$LOGS/$name.log" 2)"
    fi
  done
  shopt -s nullglob
  reports=("$WORK"/nccl-*-rank*.xml)
  shopt -u nullglob
  if ((${#reports[@]})); then
    python3 "$TOOLS" gtest "${reports[@]}" >"$WORK/nccl_tests.rows"
    n=$(grep -c . "$WORK/nccl_tests.rows")
    nskip=$(grep -c '|skipped|' "$WORK/nccl_tests.rows")
    if ((n > 0 && nskip == n)); then
      row nccl "$n NCCL tests (2 ranks)" "no device" "all skipped: $(grep -h -m1 -o -E 'no CUDA device|not under mpirun|needs exactly 2 ranks' "$LOGS"/nccl-*.log | head -1)"
    else
      while IFS='|' read -r tname status _ secs; do
        row nccl "$tname" "$status" "2 ranks on one GPU, NCCL_HOSTID per rank; ${secs} s"
      done <"$WORK/nccl_tests.rows"
    fi
  fi
fi

# ---- 5. speed, last (it takes what is left of the budget): an 8B-shaped bf16 model on the GPU ----
# speed_run NAME ROWS PROMPT NEW MAX_SEQS MAX_BATCH_TOKENS SECONDS: one CUDA job; sets RESULTS.
SPEED_DEVICE=cuda
speed_run() {
  local name=$1 rows=$2 plen=$3 new=$4 seqs=$5 mbt=$6 secs=$7
  python3 "$TOOLS" prompts "$WORK/$name.jsonl" "$rows" "$plen" "$VOCAB8" 2
  write_job "$WORK/$name.yaml" "$M8B" "$WORK/$name.jsonl" "$WORK/$name.h5" "$SPEED_DEVICE" \
    "sampling:" "  max_new_tokens: $new" "  temperature: 0.0" "  ignore_eos: true" \
    "engine:" "  max_seqs: $seqs" "  max_batch_tokens: $mbt"
  run_job "$name" "$secs" 1 "$WORK/$name.yaml"
}
if ! skipping speed; then
  if [[ "$EMULATED" == 1 ]]; then
    row speed "8B bf16 decode/prefill/throughput" "not measured" "the emulated device says nothing about speed"
  elif ((GPUS == 0)) && [[ "$SPEED_ON_CPU" != 1 ]]; then
    row speed "8B bf16 decode/prefill/throughput" "no device" "needs a GPU (GPU_CHECK_SPEED_ON_CPU=1 rehearses it on a tiny model)"
  elif ((GPUS > 0)) && [[ -n "$CUDA_REFUSED" ]]; then
    row speed "8B bf16 decode/prefill/throughput" refused "not started: $CUDA_REFUSED"
  else
    if ((GPUS == 0)); then
      SPEED_DEVICE=cpu
      M8B=$WORK/models/tiny-speed
      make_model "$M8B" 60 --preset tiny --dtype bfloat16
      SPEED_LABEL="tiny bf16 on cpu (rehearsal)"
      SIZES=(1 16)
      PREFILL_PLEN=256
      TP_ROWS=64
    else
      # 16 GB of weights: in RAM (/dev/shm) when it has room, so neither writing nor loading waits on the disk.
      M8B=$WORK/models/m8b-bf16
      shm_free=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)
      ((${shm_free:-0} > 24 * 1024 * 1024)) && M8B=/dev/shm/tpbatch-gpu-check-m8b && CLEANUP+=("$M8B")
      t0=$SECONDS
      make_model "$M8B" 240 --preset 8b
      SPEED_LABEL="8B bf16"
      SIZES=(1 16 64 256)
      PREFILL_PLEN=2048
      TP_ROWS=1024
      row speed "make-model --preset 8b" "$([[ -f $M8B/model.safetensors ]] && echo ok || echo FAIL)" \
        "$((SECONDS - t0)) s, $(du -sh "$M8B" 2>/dev/null | cut -f1)"
    fi
    if [[ -f "$M8B/model.safetensors" ]]; then
      VOCAB8=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$M8B/config.json")
      [[ -z "$BW_GBS" ]] && row speed "copy bandwidth" "unknown" "no gpu_bench figure: floors not computed (GPU_CHECK_BW_GBS sets one)"
      res=""
      for b in "${SIZES[@]}"; do
        new=64
        rc=0
        speed_run "decode-b$b" "$b" 128 "$new" "$b" 8192 90 || rc=$?
        if ((rc != 0)); then
          IFS='|' read -r res det <<<"$(why_not "decode-b$b" $rc)"
          row speed "$SPEED_LABEL decode batch $b" "$res" "$det"
          [[ "$res" == refused ]] && break
          continue
        fi
        tpot=$(inspect_field "$WORK/decode-b$b.h5" tpot | sed -n 's/^p50 \([0-9.]*\) ms.*/\1/p')
        wbytes=$(grep -m1 -o 'weights: [0-9.]* [KMG]iB per rank' "$LOGS/decode-b$b.log" | awk '{
          f = $3 == "KiB" ? 1024 : $3 == "MiB" ? 1048576 : 1073741824; printf "%.0f", $2 * f }')
        kvb=$(grep -m1 -o -E '[0-9]+ bytes per token per rank' "$LOGS/decode-b$b.log" | awk '{print $1}')
        fl="n/a"
        if [[ -n "$BW_GBS" && -n "$wbytes" && -n "$kvb" ]]; then
          fl=$(python3 "$TOOLS" floor "$wbytes" "$kvb" "$b" $((128 + new / 2)) "$BW_GBS" "$M8B")
        fi
        ratio=$(python3 -c "print('%.2fx' % ($tpot / $fl))" 2>/dev/null || echo "n/a")
        row speed "$SPEED_LABEL decode batch $b" "${tpot:-?} ms/step" \
          "floor $fl ms (weights $(awk -v b="${wbytes:-0}" 'BEGIN { printf "%.3g", b / 1e9 }') GB less the embedding table, + KV ${kvb:-?} B/token x $b x $((128 + new / 2)) at ${BW_GBS:-?} GB/s): ${ratio} the floor; $(inspect_field "$WORK/decode-b$b.h5" throughput)"
      done
      if [[ "${res:-}" != refused ]]; then
        rc=0
        speed_run prefill 32 "$PREFILL_PLEN" 1 32 8192 120 || rc=$?
        if ((rc == 0)); then
          read -r ptok wall <<<"$(px "$TPBATCH" inspect "$WORK/prefill.h5" | awk '/^tokens/ {p = $3; gsub(/,/, "", p)} /^wall/ {w = $2} END {print p, w}')"
          fpt=$(python3 "$TOOLS" flops "$M8B" "$PREFILL_PLEN")
          row speed "$SPEED_LABEL prefill $PREFILL_PLEN-token prompts" \
            "$(python3 -c "print('%.0f tok/s' % ($ptok / $wall))" 2>/dev/null || echo '?')" \
            "$(python3 -c "print('%.3g TFLOP/s' % ($ptok * $fpt / $wall / 1e12))" 2>/dev/null || echo '?') ($ptok prompt tokens in $wall s, 32 rows, max_batch_tokens 8192)"
        else
          IFS='|' read -r res det <<<"$(why_not prefill $rc)"
          row speed "$SPEED_LABEL prefill" "$res" "$det"
        fi
        rc=0
        speed_run throughput "$TP_ROWS" 128 128 256 8192 150 || rc=$?
        if ((rc == 0)); then
          row speed "$SPEED_LABEL $TP_ROWS rows 128/128" "$(inspect_field "$WORK/throughput.h5" throughput | awk '{print $1, "out tok/s"}')" \
            "$(inspect_field "$WORK/throughput.h5" wall) wall; max_seqs 256; ttft $(inspect_field "$WORK/throughput.h5" ttft)"
        else
          IFS='|' read -r res det <<<"$(why_not throughput $rc)"
          row speed "$SPEED_LABEL $TP_ROWS rows 128/128" "$res" "$det"
        fi
      fi
    else
      row speed "$SPEED_LABEL" FAIL "no model: $(log_tail "$LOGS/make-model-$(basename "$M8B").log" 2)"
    fi
  fi
fi

((${#CLEANUP[@]})) && rm -rf "${CLEANUP[@]}"
row total "wall time" "$((SECONDS - T_START)) s" "budget ${BUDGET} s; logs in $LOGS"
echo
cat "$TABLE"
if [[ -n "${OUT:-}" ]]; then
  tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$WORK" logs 2>/dev/null
fi
printf '%s\n' "${ROWS[@]}" | cut -d'|' -f3 | grep -q '^FAIL' && exit 1
exit 0
