#!/usr/bin/env bash
# Every line a run writes to standard error starts with the UTC time and the rank that wrote it:
# "2026-12-02T14:31:07Z [rank 0] [tpbatch] ...", under mpirun as in a single process.
source "$(dirname "$0")/lib.sh"
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' '{"id": "b", "prompt": "The little dog"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5" "sampling:" "  max_new_tokens: 2"
mpirun_tpbatch 2 "$WORK/job.yaml" 2>"$WORK/log" || fail "the run failed: $(tail -3 "$WORK/log")"
grep -q "KV cache:" "$WORK/log" || fail "the log has no start-up lines: $(head -3 "$WORK/log")"
bad=$(grep -v -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z \[rank [01]\] ' "$WORK/log" || true)
[ -z "$bad" ] || fail "lines without time and rank: $(head -3 <<<"$bad")"
echo "$(wc -l <"$WORK/log") lines, e.g. $(grep -m1 "KV cache" "$WORK/log" | cut -c1-100)"
