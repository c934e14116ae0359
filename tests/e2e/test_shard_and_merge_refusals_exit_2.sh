#!/usr/bin/env bash
# What sharding and `tpbatch merge` refuse, each with exit 2 and a message naming the flag, key,
# file, shard or lines, and nothing written: a malformed or out-of-range --shard / input.shard,
# input.shard: slurm outside an evenly stepped Slurm array, a {shard} placeholder in an unsharded
# job's output.path, a shard's file resumed as another shard or as the whole job; merging with a
# shard missing, a shard given twice, a part with unfinished rows, a part of another job, parts of
# two shardings, a whole job's file as a part, the output being a part, an existing output
# without --force.
source "$(dirname "$0")/lib.sh"
MODEL=$STORIES
for i in 1 2 3 4 5 6 7 8; do echo "{\"id\": \"r$i\", \"prompt\": \"Once upon a time $i\"}"; done >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$MODEL" "$WORK/in.jsonl" "$WORK/out.h5" "sampling:" "  max_new_tokens: 2"

# refused WHAT PATTERN CMD...: CMD exits 2 and its stderr matches PATTERN.
refused() {
  local what=$1 pattern=$2 rc
  shift 2
  set +e
  "$@" >"$WORK/stdout" 2>"$WORK/log"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$what: exited $rc, want 2: $(cat "$WORK/log")"
  grep -q -- "$pattern" "$WORK/log" || fail "$what: the message does not say '$pattern': $(cat "$WORK/log")"
  echo "$what: $(grep -m1 error "$WORK/log" | cut -c1-170)"
}

echo "== --shard and input.shard"
refused "--shard 4/4" "--shard '4/4': shard index 4 is not below the count 4" "$TPBATCH" "$WORK/job.yaml" --shard 4/4
refused "--shard 0/0" "--shard '0/0': the shard count must be at least 1" "$TPBATCH" "$WORK/job.yaml" --shard 0/0
refused "--shard 1-4" "--shard '1-4' is not a shard (INDEX/COUNT" "$TPBATCH" "$WORK/job.yaml" --shard 1-4
refused "--shard -1/4" "--shard '-1/4' is not a shard" "$TPBATCH" "$WORK/job.yaml" --shard -1/4
refused "--shard ''" "--shard '': give INDEX/COUNT" "$TPBATCH" "$WORK/job.yaml" --shard ''
cp "$WORK/job.yaml" "$WORK/bad.yaml"
echo "  shard: 5/2" >>"$WORK/bad.yaml"  # under output:, the last section: move it to input:
sed -i '$d' "$WORK/bad.yaml"
sed -i 's|^  path: '"$WORK"'/in.jsonl$|&\n  shard: 5/2|' "$WORK/bad.yaml"
refused "input.shard: 5/2" "bad.yaml: input.shard '5/2': shard index 5 is not below the count 2" "$TPBATCH" "$WORK/bad.yaml"
refused "--set input.shard=2/x" "--set input.shard=2/x: input.shard '2/x' is not a shard" \
  "$TPBATCH" "$WORK/job.yaml" --set input.shard=2/x
refused "slurm outside an array job" "SLURM_ARRAY_TASK_ID is not set" \
  env -u SLURM_ARRAY_TASK_ID "$TPBATCH" "$WORK/job.yaml" --shard slurm
refused "slurm with a list of ids" "are not one evenly stepped range" env SLURM_ARRAY_TASK_ID=5 \
  SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_COUNT=3 "$TPBATCH" "$WORK/job.yaml" --shard slurm
refused "{shard} unsharded" "output.path '$WORK/x-{shard}.h5' has a {shard} placeholder, but the job is not sharded" \
  "$TPBATCH" "$WORK/job.yaml" --set "output.path=$WORK/x-{shard}.h5"
ls "$WORK" | grep -q '\.h5' && fail "a refused run wrote a results file: $(ls "$WORK")"

echo "== resume of a shard's file"
for i in 0 1 2 3; do "$TPBATCH" "$WORK/job.yaml" --shard "$i/4" 2>/dev/null || fail "shard $i/4 failed"; done
part() { echo "$WORK/out.shard-000$1-of-0004.h5"; }
cp "$(part 1)" "$WORK/shard1.h5"
cp "$(part 1)" "$(part 2)"
refused "shard 1's file resumed as shard 2" "it holds shard 1 of 4 (input lines 3 to 4), this job runs shard 2 of 4 (input lines 5 to 6)" \
  "$TPBATCH" "$WORK/job.yaml" --shard 2/4 --set output.if_exists=resume
cmp -s "$(part 2)" "$WORK/shard1.h5" || fail "the refused resume changed the file"
cp "$(part 1)" "$WORK/out.h5"
refused "shard 1's file resumed as the whole job" "it holds shard 1 of 4 (input lines 3 to 4), this job runs the whole job" \
  "$TPBATCH" "$WORK/job.yaml" --set output.if_exists=resume
rm "$WORK/out.h5"
"$TPBATCH" "$WORK/job.yaml" --shard 2/4 2>/dev/null || fail "shard 2/4 failed"

echo "== merge"
no_output() { [ ! -e "$WORK/m.h5" ] && [ ! -e "$WORK/m.h5.partial" ] || fail "a refused merge wrote $WORK/m.h5"; }
refused "a shard missing" "shard 2 of 4 is missing (3 parts given)" \
  "$TPBATCH" merge "$WORK/m.h5" "$(part 0)" "$(part 1)" "$(part 3)"
no_output
refused "a shard twice" "shard 1 of 4 is given twice: '$(part 1)' and '$WORK/shard1.h5'" \
  "$TPBATCH" merge "$WORK/m.h5" "$(part 0)" "$(part 1)" "$WORK/shard1.h5" "$(part 2)" "$(part 3)"
no_output
cp "$(part 3)" "$WORK/unfinished.h5"
$PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f['done'][7]=0" "$WORK/unfinished.h5" 2>/dev/null ||
  { echo "SKIP: $PY lacks h5py"; exit 77; }
refused "unfinished rows" "part '$WORK/unfinished.h5', shard 3 of 4 (input lines 7 to 8), is not finished: 1 row is missing: input line 8" \
  "$TPBATCH" merge "$WORK/m.h5" "$(part 0)" "$(part 1)" "$(part 2)" "$WORK/unfinished.h5"
no_output
"$TPBATCH" "$WORK/job.yaml" --shard 3/4 --set sampling.max_new_tokens=3 --set output.path="$WORK/other.h5" 2>/dev/null ||
  fail "the other job's shard failed"
refused "a part of another job" "part '$WORK/other.shard-0003-of-0004.h5' is not of the same job as '$(part 0)': it was written by a different job: 'sampling.max_new_tokens' is 3 there and 2 here" \
  "$TPBATCH" merge "$WORK/m.h5" "$(part 0)" "$(part 1)" "$(part 2)" "$WORK/other.shard-0003-of-0004.h5"
no_output
"$TPBATCH" "$WORK/job.yaml" --shard 1/2 2>/dev/null || fail "shard 1/2 failed"
refused "two shardings" "the parts come from different shardings" \
  "$TPBATCH" merge "$WORK/m.h5" "$(part 0)" "$(part 1)" "$WORK/out.shard-0001-of-0002.h5"
no_output
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the whole job failed"
refused "a whole job's file" "part '$WORK/out.h5' is not a shard's results file" \
  "$TPBATCH" merge "$WORK/m.h5" "$WORK/out.h5"
refused "output is a part" "the output '$(part 0)' is the part" \
  "$TPBATCH" merge "$(part 0)" "$(part 0)" "$(part 1)" "$(part 2)" "$(part 3)" --force
cmp -s "$(part 1)" "$WORK/shard1.h5" || fail "a refused merge changed a part"
echo existing >"$WORK/m.h5"
refused "existing output" "the output '$WORK/m.h5' exists (--force replaces it)" \
  "$TPBATCH" merge "$WORK/m.h5" "$(part 0)" "$(part 1)" "$(part 2)" "$(part 3)"
[ "$(cat "$WORK/m.h5")" = existing ] || fail "a refused merge changed the existing output"
"$TPBATCH" merge --force "$WORK/m.h5" "$(part 0)" "$(part 1)" "$(part 2)" "$(part 3)" >/dev/null ||
  fail "merge --force over an existing file failed"
"$TPBATCH" inspect "$WORK/m.h5" | grep -q "rows        8 / 8 done" || fail "the forced merge: $("$TPBATCH" inspect "$WORK/m.h5")"
echo "merge --force replaced the existing output"
