#!/usr/bin/env bash
# A resumed run says at start how far the file is: "resuming: N of M rows done (in FILE); computing
# the other K". Here the input grew by a line after the first run.
source "$(dirname "$0")/lib.sh"
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' '{"id": "b", "prompt": "The little dog"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5" "sampling:" "  max_new_tokens: 2"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/first.log" || fail "the first run failed"
grep -q "resuming" "$WORK/first.log" && fail "a fresh run says it resumes"
echo '{"id": "c", "prompt": "A cat"}' >>"$WORK/in.jsonl"
"$TPBATCH" "$WORK/job.yaml" --set output.if_exists=resume 2>"$WORK/log" || fail "the resume failed: $(tail -3 "$WORK/log")"
grep -q "\[tpbatch\] resuming: 2 of 3 rows done (in $WORK/r.h5); computing the other 1" "$WORK/log" ||
  fail "no resume line: $(cat "$WORK/log")"
echo "$(grep resuming "$WORK/log")"
