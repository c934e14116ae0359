#!/usr/bin/env bash
# Prefix caching (engine.prefix_caching) on and off give the same greedy tokens and logprobs
# within 1e-5, at TP=1, TP=2, PP=2 and DP=2 on stories260K and PP=2 on a generated model, for rows
# that share a long few-shot prefix (some rows identical, some unrelated). With caching on the
# run must have served prompt tokens from the cache (/metrics prompt_tokens_cached > 0, and the
# done summary says so); with it off, none. A scoring job next to a cached prefix scores as
# without the cache.
source "$(dirname "$0")/../e2e/lib.sh"
E2E="$HERE/../e2e"
need_stories
"$TPBATCH" make-model "$WORK/gen" --preset tiny --layers 2 --heads 4 --kv-heads 2 --seed 11 >/dev/null

$PY - "$WORK/rows.jsonl" <<'PY'
import json, sys
prefix = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with "
          "her friends. One day, she saw a big red ball under a tree. She ran to get it, but a dog took it "
          "first. Lily was sad, so her mom gave her a hug and said: ")
endings = ["\"Let's find the dog.\"", "\"Do not cry.\"", "\"We can share.\"", "\"Look at the sky!\"",
           "\"You are brave.\"", "\"Go and ask him nicely.\""]
rows = [{"id": f"shared{i}", "prompt": prefix + e} for i, e in enumerate(endings)]
rows += [{"id": f"same{i}", "prompt": prefix} for i in range(3)]
rows += [{"id": "other0", "prompt": "Tom had a blue car."}, {"id": "other1", "prompt": "The sun was hot."}]
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
NROWS=$(wc -l <"$WORK/rows.jsonl")

# cached_tokens FILE: the run's prompt tokens served from the prefix cache, per /metrics.
cached_tokens() {
  $PY -c "import h5py,sys; print(int(h5py.File(sys.argv[1])['metrics'].attrs['last_run_prompt_tokens_cached']))" "$1"
}

run_pair() {  # run_pair NAME MODEL NP SETTINGS...: caching on and off, compared
  local name=$1 model=$2 np=$3
  shift 3
  write_job "$WORK/job.yaml" "$model" "$WORK/rows.jsonl" "$WORK/x.h5" \
    "sampling:" "  max_new_tokens: 8" "  ignore_eos: true"
  for mode in true false; do
    mpirun_tpbatch "$np" "$WORK/job.yaml" --set output.path="$WORK/$name-$mode.h5" \
      --set engine.prefix_caching=$mode "$@" 2>"$WORK/$name-$mode.log" || { cat "$WORK/$name-$mode.log"; fail "$name $mode"; }
  done
  local on off
  on=$(cached_tokens "$WORK/$name-true.h5")
  off=$(cached_tokens "$WORK/$name-false.h5")
  echo "== $name: cached prompt tokens on $on, off $off"
  [ "$on" -gt 0 ] || fail "$name: prefix caching on served no prompt tokens from the cache"
  [ "$off" -eq 0 ] || fail "$name: prefix caching off still reports $off cached tokens"
  grep -q "prompt tokens: [0-9]* computed, $on cached" "$WORK/$name-true.log" ||
    fail "$name: the done summary does not report the cached tokens: $(cat "$WORK/$name-true.log")"
  $PY "$E2E/compare_runs.py" "$WORK/$name-true.h5" "$WORK/$name-false.h5" --tol 1e-5 --expect-rows "$NROWS"
}

run_pair stories-tp1 "$STORIES" 1
run_pair stories-tp2 "$STORIES" 2 --set parallel.tensor=2
run_pair stories-pp2 "$STORIES" 2 --set parallel.pipeline=2
# DP=2: each replica reads at most 4 rows ahead, so both replicas get rows (and caches of their own).
run_pair stories-dp2 "$STORIES" 2 --set engine.max_seqs=4 --set engine.lookahead=4
run_pair gen-pp2 "$WORK/gen" 2 --set parallel.pipeline=2

# Scoring rows compute every position even when their prefix is cached: same scores on and off.
$PY - "$WORK/rows.jsonl" "$WORK/score.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for r in rows[:6]:
        f.write(json.dumps({"id": r["id"], "prompt": r["prompt"], "completion": " Lily smiled."}) + "\n")
PY
write_job "$WORK/score.yaml" "$STORIES" "$WORK/score.jsonl" "$WORK/s.h5" "task: score"
for mode in true false; do
  mpirun_tpbatch 1 "$WORK/score.yaml" --set output.path="$WORK/score-$mode.h5" --set engine.prefix_caching=$mode \
    2>"$WORK/score-$mode.log" || { cat "$WORK/score-$mode.log"; fail "score $mode"; }
done
$PY - "$WORK/score-true.h5" "$WORK/score-false.h5" <<'PY'
import h5py, sys
import numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert a["metrics"].attrs["last_run_prompt_tokens_cached"] == 0, "score rows took prompt tokens from the cache"
for i in range(a["id"].shape[0]):
    la, lb = np.asarray(a["output_logprobs"][i]), np.asarray(b["output_logprobs"][i])
    assert len(la) == len(lb) > 0 and np.max(np.abs(la - lb)) <= 1e-5, (i, la, lb)
print("score rows: same logprobs with prefix caching on and off")
PY
