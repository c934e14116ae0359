# Shared by the end-to-end tests: locating the binary and the test assets, mpirun as root.
# Tests exit 77 (ctest: skipped) when a tool they need is absent; every asset is in the clone.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
: "${TPBATCH:?TPBATCH must point at the tpbatch binary}"
: "${TPBATCH_BUILD_DIR:?}"
REFERENCE="$TPBATCH_BUILD_DIR/tests/reference/tpbatch_reference"
PY=/usr/bin/python3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpbatch-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# The real model every test runs (committed: models/stories260K) and the tokenizer suites of
# tests/data/ (unpacked by the build: tests/data/unpack_tokenizers.cmake).
STORIES=$(cd "$HERE/../.." && pwd)/models/stories260K
TEST_TOKENIZERS=${TPBATCH_TEST_TOKENIZERS_DIR:-}

# A test of the real model fails, never skips, without it: it is part of the clone.
need_stories() {
  [ -f "$STORIES/model.safetensors" ] || fail "$STORIES/model.safetensors is missing from the clone"
}

# mpirun_tpbatch NP ARGS...: run tpbatch on NP ranks, bounded in time.
mpirun_tpbatch() {
  local np=$1
  shift
  timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$TPBATCH" "$@"
}

# write_job FILE MODEL INPUT OUTPUT [extra YAML lines...]
write_job() {
  local file=$1 model=$2 input=$3 output=$4
  shift 4
  {
    echo "model: $model"
    echo "input:"
    echo "  path: $input"
    echo "output:"
    echo "  path: $output"
    echo "  if_exists: overwrite"
    for line in "$@"; do echo "$line"; done
  } >"$file"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# write_prompts FILE N [PROMPT]: N rows {"id": "r<i>", "prompt": PROMPT} (default "Once upon a time").
write_prompts() {
  $PY - "$1" "$2" "${3:-Once upon a time}" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": f"r{i}", "prompt": sys.argv[3]}) + "\n")
PY
}

# write_varied_prompts FILE N FIRST SPAN [ID_PREFIX]: N rows {"id": "<ID_PREFIX><i>", "prompt": ...}
# whose prompt is the first FIRST + i % SPAN words of one story sentence (default prefix "r"), so
# rows of different lengths finish at different steps.
write_varied_prompts() {
  $PY - "$1" "$2" "$3" "$4" "${5:-r}" <<'PY'
import json, sys
words = "Once upon a time there was a little girl named Lily who loved to play in the park".split()
first, span, prefix = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": f"{prefix}{i}", "prompt": " ".join(words[: first + i % span])}) + "\n")
PY
}

# --- Generated models checked against scripts/hf_reference.py's numpy re-implementation of
# transformers' modelling code (the model-family tests). NEW: new tokens per row (default 16).
REFPY="$HERE/../../scripts/hf_reference.py"
NEW=${NEW:-16}

need_numpy_h5py() {
  $PY -c "import numpy, h5py" 2>/dev/null || { echo "SKIP: $PY lacks numpy or h5py"; exit 77; }
}
ref_numpy() { $PY "$REFPY" --backend numpy "$@"; }

# patch_json FILE PYTHON-STATEMENTS: edit a JSON object in place; the object is `c`.
patch_json() {
  $PY - "$1" "$2" <<'PY'
import json, sys
path, code = sys.argv[1], sys.argv[2]
c = json.load(open(path))
exec(code)
json.dump(c, open(path, "w"), indent=2)
PY
}

# generated_model NAME MAKE-MODEL-OPTIONS...: $WORK/NAME from `tpbatch make-model --preset tiny`.
generated_model() { "$TPBATCH" make-model "$WORK/$1" --preset tiny "${@:2}" >/dev/null; }

# model_variant NAME BASE EDIT: $WORK/NAME shares $WORK/BASE's weights, with EDIT applied to its config.json.
model_variant() {
  mkdir "$WORK/$1"
  ln -s "$WORK/$2/model.safetensors" "$WORK/$1/model.safetensors"
  cp "$WORK/$2"/*.json "$WORK/$1/"
  patch_json "$WORK/$1/config.json" "$3"
}

# reference_matters MODEL EDIT WHAT: the reference's greedy answer on a long prompt changes when
# EDIT is applied to MODEL's config (so a test of WHAT could fail).
REFERENCE_MATTERS=0
reference_matters() {
  REFERENCE_MATTERS=$((REFERENCE_MATTERS + 1))
  model_variant "$1-without$REFERENCE_MATTERS" "$1" "$2"
  local ids=1,300,301,302,303,304,305,306,307,308,309,310,311,312,313,314,315,316,317,318
  $PY - <(ref_numpy generate "$WORK/$1" --ids $ids --max-new-tokens $NEW) \
    <(ref_numpy generate "$WORK/$1-without$REFERENCE_MATTERS" --ids $ids --max-new-tokens $NEW) "$3" <<'PY'
import json, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:3])
d = max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"]))
assert a["tokens"] != b["tokens"] or d > 1e-2, f"{sys.argv[3]} changes nothing here (max diff {d})"
print(f"{sys.argv[3]} matters: tokens differ: {a['tokens'] != b['tokens']}, max |logprob diff| {d:.3g}")
PY
}

# write_reference_job: $WORK/job.yaml, greedy on prompts_mixed.jsonl (9 rows), NEW tokens each.
write_reference_job() {
  write_job "$WORK/job.yaml" MODEL "$HERE/prompts_mixed.jsonl" "$WORK/out.h5" \
    "sampling:" "  max_new_tokens: $NEW" "  ignore_eos: true" "engine:" "  max_seqs: 64"
}

# matches_reference MODEL TENSOR PIPELINE [--set KEY=VALUE...]: runs $WORK/job.yaml on $WORK/MODEL
# at that layout; greedy tokens identical to the reference's, logprobs within 1e-3.
matches_reference() {
  local model=$1 t=$2 p=$3
  shift 3
  echo "== $model, tensor $t, pipeline $p${*:+, $*}"
  mpirun_tpbatch $((t * p)) "$WORK/job.yaml" --set model="$WORK/$model" --set parallel.tensor="$t" \
    --set parallel.pipeline="$p" "$@" 2>"$WORK/log" || { cat "$WORK/log"; fail "$model at TP=$t PP=$p $*: tpbatch failed"; }
  ref_numpy check "$WORK/out.h5" --model "$WORK/$model" --max-new-tokens $NEW --expect-rows 9 --tol 1e-3 ||
    fail "$model at TP=$t PP=$p $* does not match the reference"
}

# --- Quantized checkpoints against their dequantized float32 twins (tests/mpi/test_*_twin.sh).
# make_quantized_twin SCHEME MAKE-MODEL-OPTIONS...: $WORK/SCHEME (make-model --quantize SCHEME) and
# $WORK/SCHEME-twin (the same weights with --dequantize), each with a greedy 24-token job on
# prompts_mixed.jsonl (9 rows).
make_quantized_twin() {
  local scheme=$1
  shift
  "$TPBATCH" make-model "$WORK/$scheme" "$@" --quantize "$scheme" >/dev/null
  "$TPBATCH" make-model "$WORK/$scheme-twin" "$@" --quantize "$scheme" --dequantize >/dev/null
  local model
  for model in "$scheme" "$scheme-twin"; do
    write_job "$WORK/$model.yaml" "$WORK/$model" "$HERE/prompts_mixed.jsonl" "$WORK/$model.h5" \
      "sampling:" "  max_new_tokens: 24" "  ignore_eos: true"
  done
}

# twin_matches_at_each_layout SCHEME VALUES RATIO TOL [COMPARE-OPTIONS...]: at TP=1, TP=2, PP=2 and
# DP=2 both models run; the quantized one must log "linear layers VALUES" (its weights kept so),
# give the twin's greedy tokens with logprobs within TOL (compare_runs.py, which takes the
# options), and at TP=1 hold its weights in under RATIO of the twin's bytes. Each layout's
# quantized results stay as $WORK/SCHEME-np<N>-tp<T>-pp<P>.h5.
twin_matches_at_each_layout() {
  local scheme=$1 values=$2 ratio=$3 tol=$4 layout model
  shift 4
  for layout in "1 1 1" "2 2 1" "2 1 2" "2 1 1"; do
    set -- $layout "$@"
    echo "== $scheme: np $1, tensor $2, pipeline $3"
    for model in "$scheme" "$scheme-twin"; do
      mpirun_tpbatch "$1" "$WORK/$model.yaml" --set parallel.tensor="$2" --set parallel.pipeline="$3" \
        2>"$WORK/$model.log" || { cat "$WORK/$model.log"; fail "$model at np $1 tensor $2 pipeline $3 exited $?"; }
    done
    grep -q "linear layers $values" "$WORK/$scheme.log" ||
      { cat "$WORK/$scheme.log"; fail "$scheme: weights not kept as $values"; }
    $PY "$HERE/compare_runs.py" "$WORK/$scheme.h5" "$WORK/$scheme-twin.h5" --tol "$tol" --expect-rows 9 "${@:4}" ||
      fail "$scheme at np $1 tensor $2 pipeline $3 vs its dequantized twin"
    cp "$WORK/$scheme.h5" "$WORK/$scheme-np$1-tp$2-pp$3.h5"
    if [ "$layout" = "1 1 1" ]; then
      local q t
      q=$(sed -n 's/.*weights: \([0-9.]*\) MiB per rank.*/\1/p' "$WORK/$scheme.log" | head -1)
      t=$(sed -n 's/.*weights: \([0-9.]*\) MiB per rank.*/\1/p' "$WORK/$scheme-twin.log" | head -1)
      $PY -c "import sys; r = $q / $t; print('$scheme weights %s MiB vs twin %s MiB: ratio %.3f' % ('$q', '$t', r)); sys.exit(0 if r < $ratio else 1)" ||
        fail "$scheme weights $q MiB vs the float32 twin $t MiB: not kept as $values"
    fi
    set -- "${@:4}"
  done
}

# --- Crash tests: the LD_PRELOAD fault injector (kill_at_write.c) that stops a job at its K-th
# write, sync, rename... of the output.

# build_kill_at_write: $WORK/kill_at_write.so (skips the test without a C compiler).
build_kill_at_write() {
  command -v cc >/dev/null || { echo "SKIP: no C compiler for the fault injector"; exit 77; }
  cc -shared -fPIC -O1 -o "$WORK/kill_at_write.so" "$HERE/kill_at_write.c" -ldl || fail "kill_at_write.c does not build"
}

# run_killed_at K OUT ARGS...: runs tpbatch ARGS with the injector stopping it at the K-th change to
# OUT (or its journal / partial file); KILL_SIGNAL, KILL_TORN pass through. Prints the exit status.
run_killed_at() {
  local k=$1 out=$2
  shift 2
  set +e
  KILL_AT=$k KILL_PREFIX="$out" LD_PRELOAD="$WORK/kill_at_write.so" timeout 120 "$TPBATCH" "$@" >/dev/null 2>&1
  local rc=$?
  set -e
  echo "$rc"
}

# results_equal REFERENCE FILE...: every FILE holds exactly REFERENCE's rows and job attributes
# (logprobs within 1e-4: a resumed row may be computed in another batch; job_yaml but its paths and
# if_exists), complete, and nothing is left beside it (no journal, no partial file).
results_equal() {
  $PY - "$@" <<'PY'
import os, sys, h5py
ref_path, paths = sys.argv[1], sys.argv[2:]
import re
skip_attrs = {"tpbatch_version", "commit_id", "job_id"}
def attrs(f):
    out = {k: v for k, v in f.attrs.items() if k not in skip_attrs}
    out["job_yaml"] = re.sub(r"(?m)^  (path|if_exists): .*\n", "", str(out.get("job_yaml")))
    return out
def rows(f):
    out = {}
    for name, ds in f.items():
        if isinstance(ds, h5py.Dataset):
            out[name] = [list(v) if hasattr(v, "__len__") and not isinstance(v, (bytes, str)) else v for v in ds[:]]
    return out
with h5py.File(ref_path, "r") as f:
    ref_rows, ref_attrs = rows(f), attrs(f)
bad = []
for p in paths:
    for side in (".journal", ".partial"):
        if os.path.exists(p + side):
            bad.append(f"{p}: {p + side} left behind")
    try:
        with h5py.File(p, "r") as f:
            got_rows, got_attrs = rows(f), attrs(f)
    except Exception as e:
        bad.append(f"{p}: cannot be read: {e}")
        continue
    for k, v in ref_attrs.items():
        if k not in got_attrs or str(got_attrs[k]) != str(v):
            bad.append(f"{p}: attribute {k} is {str(got_attrs.get(k))[:100]!r}, want {str(v)[:100]!r}")
    for name, want in ref_rows.items():
        got = got_rows.get(name)
        if got is None or len(got) != len(want):
            bad.append(f"{p}: /{name} missing or of another length")
            continue
        for i, (x, y) in enumerate(zip(want, got)):
            same = (len(x) == len(y) and all(abs(a - b) <= 1e-4 for a, b in zip(x, y))) if "logprob" in name and isinstance(x, list) \
                else (abs(x - y) <= 1e-4 if name == "logprob_sum" else x == y)
            if not same:
                bad.append(f"{p}: /{name}[{i}] is {y!r}, want {x!r}")
                break
if bad:
    print("\n".join(b[:300] for b in bad[:20]))
    sys.exit(1)
print(f"{len(paths)} resumed files equal the uninterrupted run")
PY
}

# stop_after_first_row JOB LOG: runs tpbatch on JOB until it has recorded its first row and stopped
# itself (TPBATCH_TEST_STOP_AFTER_ROWS), then kills it: a results file with unfinished rows.
stop_after_first_row() {
  TPBATCH_TEST_STOP_AFTER_ROWS=1 "$TPBATCH" "$1" 2>"$2" &
  local pid=$!  # tpbatch itself: its state is what is watched
  for _ in $(seq 1200); do  # until it has stopped itself (or ended)
    [ "$(ps -o stat= -p "$pid" | cut -c1)" = T ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$(ps -o stat= -p "$pid" | cut -c1)" != T ]; then
    kill -KILL "$pid" 2>/dev/null || true
    fail "the job did not stop after its first row: $(tail -3 "$2")"
  fi
  kill -KILL "$pid"
  wait "$pid" || true
}
