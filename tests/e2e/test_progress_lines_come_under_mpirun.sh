#!/usr/bin/env bash
# Under mpirun standard error is a pipe, not a terminal: rank 0 writes a plain progress line
# ("[tpbatch] rows N/M ...") every engine.progress_interval seconds while the job runs, also while
# no row ends (here one long row: lines saying 0/1 before it finishes). With an interval of 0 every
# pass of the engine loop may write one.
source "$(dirname "$0")/lib.sh"
echo '{"id": "long", "prompt": "Once upon a time"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5" "sampling:" "  max_new_tokens: 32" \
  "  ignore_eos: true" "engine:" "  progress_interval: 0"
mpirun_tpbatch 2 "$WORK/job.yaml" --set parallel.tensor=2 2>"$WORK/log" || fail "the run failed: $(tail -3 "$WORK/log")"
grep -q '\[rank 0\] \[tpbatch\] rows 0/1 ' "$WORK/log" || fail "no progress line while the row ran: $(cat "$WORK/log")"
grep -q '\[rank 0\] \[tpbatch\] rows 1/1 ' "$WORK/log" || fail "no final progress line"
grep '\[tpbatch\] rows ' "$WORK/log" | grep -v '\[rank 0\]' && fail "a progress line from another rank"
grep -q $'\r' "$WORK/log" && fail "a terminal's rewriting line in a pipe"
echo "$(grep -c '\[tpbatch\] rows ' "$WORK/log") progress lines, e.g. $(grep -m1 '\[tpbatch\] rows ' "$WORK/log")"
