#!/usr/bin/env bash
# The run's tensor-parallel collective counts ("tensor-parallel allreduce: N calls", "allreduce per
# step") are printed when a replica has more than one rank (TP > 1), and only then.
source "$(dirname "$0")/lib.sh"
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' '{"id": "b", "prompt": "The little dog"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5" "sampling:" "  max_new_tokens: 2"
mpirun_tpbatch 2 "$WORK/job.yaml" 2>"$WORK/dp.log" || fail "the TP=1 run failed: $(tail -3 "$WORK/dp.log")"
grep -q "replica 0:" "$WORK/dp.log" || fail "no replica summary: $(tail -3 "$WORK/dp.log")"
grep -E "tensor-parallel|allreduce" "$WORK/dp.log" && fail "collective counts at TP=1"
mpirun_tpbatch 2 "$WORK/job.yaml" --set parallel.tensor=2 2>"$WORK/tp.log" || fail "the TP=2 run failed: $(tail -3 "$WORK/tp.log")"
grep -q "tensor-parallel allreduce: [0-9]* calls" "$WORK/tp.log" || fail "no allreduce counts at TP=2: $(cat "$WORK/tp.log")"
grep -q "allreduce per step:" "$WORK/tp.log" || fail "no allreduce per step at TP=2"
echo "TP=2: $(grep -m1 'tensor-parallel allreduce' "$WORK/tp.log" | cut -c1-140)"
