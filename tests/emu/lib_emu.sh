# Shared by the tests of the CUDA backend on the emulated device (TPBATCH_CUDA=EMU): the same
# tpbatch binary runs a job with `device: cpu` (fp32, the reference) and `device: cuda` (bf16
# activations on the emulated device); scripts/gpu_check_tools.py compare (the GPU check's own
# comparison) judges the two with the tolerances bf16 implies and the near-tie rule. Skips (77)
# when $TPBATCH is not an emulated-device build.
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
need_numpy_h5py
"$TPBATCH" --version 2>&1 | grep -q EMULATED || { echo "SKIP: $TPBATCH is not an emulated-device build"; exit 77; }
need_stories
PROMPTS=$HERE/prompts_mixed.jsonl
export CUEMU_NCCL_TIMEOUT_S=${CUEMU_NCCL_TIMEOUT_S:-120}

# on DEVICE NP JOB [--set K=V ...]: runs JOB with `device: DEVICE` on NP ranks (log: $WORK/log).
on() {
  local dev=$1 np=$2 job=$3
  shift 3
  local rc=0
  if [ "$np" = 1 ]; then
    timeout 300 "$TPBATCH" "$job" --set device="$dev" "$@" 2>"$WORK/log" || rc=$?
  else
    CUEMU_DEVICES=$np mpirun_tpbatch "$np" "$job" --set device="$dev" "$@" 2>"$WORK/log" || rc=$?
  fi
  if [ "$rc" != 0 ]; then
    tail -20 "$WORK/log"
    fail "$dev on $np rank(s), $job $*: exit $rc"
  fi
}

# agree CUDA.h5 CPU.h5 WHAT [compare options]: the CPU run (the reference) must have recorded top
# logprobs (sampling.top_logprobs) for the near-tie rule. Defaults: 0.15 nats (stories260K's
# logprobs move by at most 0.2 under bf16 activations: see scripts/gpu_check.sh), near ties 0.5.
agree() {
  local what=$3 line
  echo "== $what"
  line=$($PY "$TPBATCH_SOURCE_DIR/scripts/gpu_check_tools.py" compare "$1" "$2" --tol 0.15 --near-tie 0.5 \
    --embed-tol 0.02 "${@:4}" 2>"$WORK/compare.log") || fail "$what: the comparison failed: $(tail -3 "$WORK/compare.log")"
  # VERDICT ROWS_SAME ROWS NEAR_TIES TOKENS_COMMON TOKENS MAX_D FIRST_DIFF
  read -r verdict same rows ties common total maxd first <<<"$line"
  echo "$verdict: rows $same/$rows identical, $ties up to a near tie, tokens $common/$total in common, max |d| $maxd"
  [ "$verdict" = pass ] || { cat "$WORK/compare.log"; fail "$what: the emulated CUDA run and the CPU run disagree"; }
}

# identical A.h5 B.h5 WHAT: the same tokens and logprobs (two runs that must compute alike).
identical() {
  echo "== $3"
  $PY - "$1" "$2" <<'PY' || fail "$3: not identical"
import h5py, sys, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for name in ("output_tokens", "output_logprobs"):
    for i in range(a["done"].shape[0]):
        x, y = np.asarray(a[name][i]), np.asarray(b[name][i])
        if x.shape != y.shape or not np.array_equal(x, y):
            sys.exit(f"row {i}: {name} differ:\n  {x[:12]}\n  {y[:12]}")
print(f"identical: {a['done'].shape[0]} rows")
PY
}

# score_input RESULTS.h5 OUT.jsonl: each row's prompt + generated tokens as a `tokens` line, so a
# score job compares every position of one run's text on both devices.
score_input() {
  $PY - "$1" "$2" <<'PY'
import h5py, json, sys
f = h5py.File(sys.argv[1], "r")
with open(sys.argv[2], "w") as out:
    for i in range(f["done"].shape[0]):
        toks = [int(t) for t in f["prompt_tokens"][i]] + [int(t) for t in f["output_tokens"][i]]
        out.write(json.dumps({"id": f["id"][i].decode(), "tokens": toks}) + "\n")
PY
}
