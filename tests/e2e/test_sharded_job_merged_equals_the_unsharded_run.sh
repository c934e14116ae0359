#!/usr/bin/env bash
# A job run as 4 shards (--shard i/4, one on 2 data-parallel ranks) and joined by `tpbatch merge`
# holds what the job run whole holds: every dataset row for row (tokens identical; logprobs within
# 1e-4, as a row computed in another batch may differ in the last bits: bit-identical on one rank),
# the job's attributes without any shard_* one. Also: a score job sharded through
# `input.shard: slurm` with Slurm array ids that do not start at 0 and a `{shard}` placeholder in
# output.path; a job whose lines have several rows (sampling.n: 2); a shard's file resumed as the
# same shard computes nothing again.
source "$(dirname "$0")/lib.sh"
$PY -c "import numpy, h5py" 2>/dev/null || { echo "SKIP: $PY lacks numpy or h5py"; exit 77; }
MODEL=$STORIES
$PY - >"$WORK/in.jsonl" <<'PY'
import json
starts = ["Once upon a time", "The little dog", "Lily went to the park", "Tom had a red ball", "One day, a cat"]
for i in range(42):
    print(json.dumps({"id": f"r{i}", "prompt": starts[i % 5] + " and" * (i % 4)}))
PY
write_job "$WORK/job.yaml" "$MODEL" "$WORK/in.jsonl" "$WORK/out.h5" "sampling:" "  max_new_tokens: 12"

# same_results WHOLE MERGED: prints "ROWS rows, max |dlogprob| D" or fails naming the difference.
same_results() {
  $PY - "$1" "$2" <<'PY'
import re, sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
bad = [f"attribute {k}" for k in b.attrs if k.startswith("shard_")]
def attr(f, k):  # job_yaml less output.path: the sharded job may name its files with {shard}
    return re.sub(r"(?m)^output:\n  path: .*\n", "output:\n", str(f.attrs.get(k)))
for k in ("model", "task", "job_yaml", "num_rows", "input_fingerprint", "model_fingerprint", "complete"):
    if attr(a, k) != attr(b, k):
        bad.append(f"attribute {k}: {a.attrs.get(k)!r} vs {b.attrs.get(k)!r}")
names = sorted(k for k in a if isinstance(a[k], h5py.Dataset))
if names != sorted(k for k in b if isinstance(b[k], h5py.Dataset)):
    bad.append(f"datasets {names} vs {sorted(b)}")
worst = 0.0
for k in names:
    x, y = a[k][:], b[k][:]
    if len(x) != len(y):
        bad.append(f"/{k}: {len(x)} vs {len(y)} rows")
        continue
    for i, (u, v) in enumerate(zip(x, y)):
        if "logprob" in k:
            u, v = np.atleast_1d(np.asarray(u, dtype=np.float64)), np.atleast_1d(np.asarray(v, dtype=np.float64))
            if u.shape != v.shape:
                bad.append(f"/{k}[{i}]: {u.size} vs {v.size} values")
                break
            if u.size:
                worst = max(worst, float(np.max(np.abs(u - v))))
        elif not np.array_equal(np.asarray(u), np.asarray(v)):
            bad.append(f"/{k}[{i}]: {u!r} vs {v!r}")
            break
if worst > 1e-4:
    bad.append(f"logprobs differ by {worst}")
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
print(f"{len(a['done'])} rows, max |dlogprob| {worst:.3g}")
PY
}

echo "== generate, greedy: 42 lines in 4 shards"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || { cat "$WORK/log"; fail "the unsharded run failed"; }
for i in 0 1 3; do
  "$TPBATCH" "$WORK/job.yaml" --shard "$i/4" 2>"$WORK/log" || { cat "$WORK/log"; fail "shard $i/4 failed"; }
done
# Shard 2 on two data-parallel replicas: the dispatcher hands out only the shard's lines.
mpirun_tpbatch 2 "$WORK/job.yaml" --shard 2/4 2>"$WORK/log" || { cat "$WORK/log"; fail "shard 2/4 on 2 ranks failed"; }
grep -q "shard 2 of 4 (input lines 22 to 31)" "$WORK/log" || fail "shard 2's start-up line: $(grep shard "$WORK/log")"
parts=("$WORK"/out.shard-000{0,1,2,3}-of-0004.h5)
for p in "${parts[@]}"; do [ -f "$p" ] || fail "no $p"; done
[ "$(ls "$WORK" | grep -c '^out\.shard-')" = 4 ] || fail "other files beside the shards: $(ls "$WORK")"
"$TPBATCH" inspect "${parts[1]}" | grep -q "rows        11 / 11 done (of the shard)" || fail "inspect of a shard: $("$TPBATCH" inspect "${parts[1]}")"
# The same shard again, resumed: nothing to compute.
"$TPBATCH" "$WORK/job.yaml" --shard 1/4 --set output.if_exists=resume 2>"$WORK/log" || fail "resuming shard 1 failed"
grep -q "rows 11/11" "$WORK/log" || fail "the resumed shard did not find its 11 rows done: $(cat "$WORK/log")"
# Given in any order.
"$TPBATCH" merge "$WORK/merged.h5" "${parts[3]}" "${parts[0]}" "${parts[2]}" "${parts[1]}" >"$WORK/merge.log" ||
  fail "merge failed: $(cat "$WORK/merge.log")"
grep -q "merged 4 shards, 42 rows" "$WORK/merge.log" || fail "merge said: $(cat "$WORK/merge.log")"
[ ! -e "$WORK/merged.h5.partial" ] && [ ! -e "$WORK/merged.h5.journal" ] || fail "merge left files beside its output"
r=$(same_results "$WORK/out.h5" "$WORK/merged.h5") || fail "the merged file differs from the unsharded run: $r"
echo "generate: $r"

echo "== score: input.shard: slurm (array ids 4..8), output.path with {shard}"
write_job "$WORK/score.yaml" "$MODEL" "$HERE/prompts_score.jsonl" "$WORK/score.h5" "task: score"
"$TPBATCH" "$WORK/score.yaml" 2>"$WORK/log" || { cat "$WORK/log"; fail "the unsharded score run failed"; }
for id in 4 5 6 7 8; do  # 5 shards of 4 lines: the first has none
  SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_MAX=8 SLURM_ARRAY_TASK_COUNT=5 \
    "$TPBATCH" "$WORK/score.yaml" --set input.shard=slurm --set output.path="$WORK/score-{shard}.h5" 2>"$WORK/log" ||
    { cat "$WORK/log"; fail "score shard of array task $id failed"; }
done
ls "$WORK"/score-000{0,1,2,3,4}-of-0005.h5 >/dev/null || fail "no {shard} files: $(ls "$WORK")"
"$TPBATCH" merge "$WORK/score-merged.h5" "$WORK"/score-000?-of-0005.h5 >/dev/null || fail "merging the score shards failed"
r=$(same_results "$WORK/score.h5" "$WORK/score-merged.h5") || fail "score: $r"
echo "score: $r"

echo "== sampling.n: 2 (each line two rows), 13 lines in 3 shards"
head -13 "$WORK/in.jsonl" >"$WORK/in13.jsonl"
n2=(--set input.path="$WORK/in13.jsonl" --set sampling.n=2 --set sampling.temperature=0.8 --set sampling.seed=7
  --set output.path="$WORK/n2.h5")
"$TPBATCH" "$WORK/job.yaml" "${n2[@]}" 2>"$WORK/log" || { cat "$WORK/log"; fail "the unsharded n=2 run failed"; }
for i in 0 1 2; do "$TPBATCH" "$WORK/job.yaml" "${n2[@]}" --shard "$i/3" 2>/dev/null || fail "n=2 shard $i failed"; done
"$TPBATCH" merge "$WORK/n2-merged.h5" "$WORK"/n2.shard-*.h5 >/dev/null || fail "merging the n=2 shards failed"
r=$(same_results "$WORK/n2.h5" "$WORK/n2-merged.h5") || fail "n=2: $r"
echo "sampling.n 2: $r"
