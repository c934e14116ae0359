#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, AddressSanitizer + UBSan) into
# $TPBATCH_BUILD_DIR/fuzz-build and runs each for a bounded time from its seed corpus
# (fuzz/corpus/<target>/ plus seeds generated here from a `make-model --preset tiny` folder).
# A crash, sanitizer report, leak, timeout or unexpected exception fails the test; the reproducer
# is kept in $TPBATCH_BUILD_DIR/fuzz-artifacts/ (replay: fuzz-build/<target> <file>).
# Skips (77) when clang or libFuzzer is not installed (Debian: clang, libclang-rt-14-dev).
#   FUZZ_SECONDS (default 15): fuzzing time per target.  FUZZ_TARGETS: a subset, space-separated.
source "$(dirname "$0")/lib.sh"
: "${TPBATCH_SOURCE_DIR:=$(cd "$HERE/../.." && pwd)}"
SECONDS_EACH=${FUZZ_SECONDS:-15}
TARGETS=(${FUZZ_TARGETS:-fuzz_safetensors_header fuzz_tokenizer_json fuzz_tokenizer_encode fuzz_jsonl_row})

CXX_CLANG=""
for c in clang++ clang++-14 clang++-15 clang++-16; do
  if command -v "$c" >/dev/null; then CXX_CLANG=$(command -v "$c"); break; fi
done
[ -n "$CXX_CLANG" ] || { echo "SKIP: clang++ not installed (apt-get install clang libclang-rt-14-dev)"; exit 77; }
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$WORK/probe.cpp"
if ! "$CXX_CLANG" -fsanitize=fuzzer,address,undefined "$WORK/probe.cpp" -o "$WORK/probe" 2>"$WORK/probe.log"; then
  echo "SKIP: $CXX_CLANG cannot link libFuzzer with ASan/UBSan (install libclang-rt-14-dev): $(head -c 300 "$WORK/probe.log")"
  exit 77
fi

# ---- build (only the sources the targets need; ccache when available) ----------------------------
FB="$TPBATCH_BUILD_DIR/fuzz-build"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
t0=$SECONDS
cmake -S "$TPBATCH_SOURCE_DIR/fuzz" -B "$FB" -DCMAKE_CXX_COMPILER="$CXX_CLANG" "${launcher[@]}" >"$WORK/configure.log" 2>&1 ||
  { cat "$WORK/configure.log"; fail "configuring fuzz/ failed"; }
cmake --build "$FB" -j"$(nproc)" --target "${TARGETS[@]}" >"$WORK/build.log" 2>&1 ||
  { tail -n 40 "$WORK/build.log"; fail "building the fuzz targets failed"; }
echo "built ${#TARGETS[@]} fuzz targets in $((SECONDS - t0))s"

# ---- seeds generated from a tiny model folder ----------------------------------------------------
"$TPBATCH" make-model "$WORK/tiny" --preset tiny >/dev/null || fail "make-model failed"
for t in "${TARGETS[@]}"; do
  mkdir -p "$WORK/corpus/$t"
  cp "$TPBATCH_SOURCE_DIR/fuzz/corpus/$t/"* "$WORK/corpus/$t/" 2>/dev/null || true
done
cp "$WORK/tiny/tokenizer.json" "$WORK/corpus/fuzz_tokenizer_json/generated_tiny.json" 2>/dev/null || true
"$PY" - "$WORK/tiny/model.safetensors" "$WORK/corpus/fuzz_safetensors_header" <<'PYEOF' || true
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
# The real header (as JSON text: the target also wraps input in a length prefix), and a small real
# file: the first three tensors, shrunk to a few elements each.
open(sys.argv[2] + '/tiny_header.json', 'wb').write(b[8:8 + n])
small, off = {"__metadata__": h.get("__metadata__", {})}, 0
for k in [k for k in h if k != "__metadata__"][:3]:
    small[k] = {"dtype": "F32", "shape": [2, 2], "data_offsets": [off, off + 16]}
    off += 16
hb = json.dumps(small).encode()
open(sys.argv[2] + '/tiny_small.safetensors', 'wb').write(struct.pack('<Q', len(hb)) + hb + bytes(off))
PYEOF

# ---- fuzz ----------------------------------------------------------------------------------------
ART="$TPBATCH_BUILD_DIR/fuzz-artifacts"
mkdir -p "$ART"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${TARGETS[@]}"; do
  max_len=4096
  [ "$t" = fuzz_tokenizer_json ] && max_len=32768
  t1=$SECONDS
  rm -f "$ART/$t-"*
  set +e
  (cd "$WORK" && timeout $((SECONDS_EACH * 3 + 120)) "$FB/$t" "$WORK/corpus/$t" -max_total_time="$SECONDS_EACH" \
    -rss_limit_mb=2048 -timeout=10 -max_len=$max_len -print_final_stats=1 -artifact_prefix="$ART/$t-") \
    >"$WORK/$t.log" 2>&1
  rc=$?
  set -e
  runs=$(grep -m1 -oE 'stat::number_of_executed_units: [0-9]+' "$WORK/$t.log" | grep -oE '[0-9]+$' || echo '?')
  cov=$(grep -oE 'cov: [0-9]+' "$WORK/$t.log" | tail -n 1 || true)
  if [ "$rc" = 0 ]; then
    echo "ok    $t: $runs runs, $cov, $((SECONDS - t1))s"
  else
    failed+=("$t")
    echo "FAIL  $t: exit $rc after $((SECONDS - t1))s"
    grep -E -A3 'ERROR|runtime error|terminate called|what\(\)' "$WORK/$t.log" | cut -c1-300 | head -n 30
    grep -E 'Test unit written to' "$WORK/$t.log" || true
    for f in "$ART/$t-"*; do
      [ -f "$f" ] || continue
      echo "reproducer $f ($(stat -c %s "$f") bytes):"
      od -A d -c "$f" | head -n 12
    done
  fi
done
echo "fuzzed ${#TARGETS[@]} targets, ${#failed[@]} failed, total ${SECONDS}s"
((${#failed[@]} == 0)) || fail "fuzz findings in: ${failed[*]} (reproducers in $ART)"
echo PASS
