#!/usr/bin/env bash
# Prefix caching on vs off (engine.prefix_caching): prompt tokens computed and wall time for rows
# that share a prefix. Usage: scripts/bench_prefix_cache.sh [BUILD_DIR]
#   1. 8 rows sharing a ~134-token prompt prefix (stories260K)
#   2. 64 rows sharing a few-shot prefix (stories260K)
#   3. 256 rows sharing a ~512-token few-shot prefix on a generated model (tiny; the
#      125M preset with BENCH_125M=1: many minutes on a CPU)
# Tokens are from the results file's /metrics; wall is the whole tpbatch process.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TPBATCH="$BUILD/tpbatch"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NP=${NP:-1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpbatch-bench-prefix.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STORIES=models/stories260K

# make_rows FILE ROWS PREFIX_WORDS: ROWS prompts, one shared prefix of about PREFIX_WORDS words
# (sentences from a few-shot block) and a short question of their own.
make_rows() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, rows, words = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
shots = ["Once upon a time, there was a little girl named Lily.", "She liked to play with her red ball.",
         "One day, Tom saw a big dog in the park.", "The dog was happy and wagged its tail.",
         "Mom said: Be kind to your friends.", "They all sat under the tree and ate cake."]
text, i = [], 0
while len(" ".join(text).split()) < words:
    text.append(shots[i % len(shots)])
    i += 1
prefix = " ".join(text)
with open(path, "w") as f:
    for r in range(rows):
        f.write(json.dumps({"id": f"r{r}", "prompt": f"{prefix} Question {r}: what did friend {r * 7 % 97} do?"}) + "\n")
PY
}

# bench NAME MODEL ROWS_FILE MAX_NEW [--set ...]: one line per mode
bench() {
  local name=$1 model=$2 rows=$3 new=$4
  shift 4
  cat >"$WORK/job.yaml" <<YAML
model: $model
input:
  path: $rows
output:
  path: $WORK/out.h5
  if_exists: overwrite
sampling:
  max_new_tokens: $new
  ignore_eos: true
YAML
  for mode in false true; do
    local t0 t1
    t0=$(date +%s.%N)
    mpirun -np "$NP" --oversubscribe --bind-to none "$TPBATCH" "$WORK/job.yaml" --set engine.prefix_caching=$mode "$@" \
      2>"$WORK/log" || { cat "$WORK/log"; exit 1; }
    t1=$(date +%s.%N)
    /usr/bin/python3 - "$WORK/out.h5" "$name" "$mode" "$t0" "$t1" <<'PY'
import h5py, sys
path, name, mode, t0, t1 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
m = h5py.File(path)["metrics"].attrs
prompt, cached = int(m["last_run_prompt_tokens"]), int(m["last_run_prompt_tokens_cached"])
print(f"{name:34s} prefix_caching={mode:5s}  prompt tokens {prompt:7d}  computed {prompt - cached:7d}  "
      f"cached {cached:7d}  run {float(m['last_run_wall_seconds']):7.2f}s  process {t1 - t0:7.2f}s")
PY
  done
}

[ -x "$TPBATCH" ] || { echo "no $TPBATCH: build first (cmake --build $BUILD)"; exit 1; }
make_rows "$WORK/rows8.jsonl" 8 64
bench "8 rows, shared ~134-token prefix" "$STORIES" "$WORK/rows8.jsonl" 16
make_rows "$WORK/rows64.jsonl" 64 260
bench "64 rows, shared few-shot prefix" "$STORIES" "$WORK/rows64.jsonl" 16
# The shape: 256 rows sharing a ~512-token prefix. The token counts do not depend on the
# model; the wall times do (tiny generated model by default, BENCH_125M=1 for the 125M preset).
PRESET=tiny
[ "${BENCH_125M:-0}" = 1 ] && PRESET=125m
"$TPBATCH" make-model "$WORK/gen" --preset "$PRESET" --max-position-embeddings 2048 --seed 1 >/dev/null
make_rows "$WORK/rows256.jsonl" 256 265
bench "256 rows, ~512-token prefix, $PRESET" "$WORK/gen" "$WORK/rows256.jsonl" 8
