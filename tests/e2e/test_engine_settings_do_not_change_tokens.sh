#!/usr/bin/env bash
# Greedy tokens are identical whatever max_seqs, max_batch_tokens and kv_cache_tokens are,
# including a KV cache so small that sequences must be preempted and recomputed, and whatever
# the admission order.
source "$(dirname "$0")/lib.sh"
need_stories
write_job "$WORK/job.yaml" "$STORIES" "$HERE/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true"
for settings in "1 4096 0" "64 4096 0" "13 16 0" "13 256 400" "9 7 160" "4 1 0"; do
  set -- $settings
  echo "== max_seqs $1, max_batch_tokens $2, kv_cache_tokens $3"
  "$TPBATCH" "$WORK/job.yaml" --set engine.max_seqs="$1" --set engine.max_batch_tokens="$2" \
    --set engine.kv_cache_tokens="$3" 2>"$WORK/log"
  cat "$WORK/log"
  $PY "$HERE/check_against_reference.py" "$WORK/out.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
done
# Longest-prompt-first admission changes the order rows run in, never their tokens.
"$TPBATCH" "$WORK/job.yaml" --set engine.admission=longest_first --set engine.max_seqs=3 2>/dev/null
$PY "$HERE/check_against_reference.py" "$WORK/out.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
# The smallest cache really preempted (the engine reports it).
"$TPBATCH" "$WORK/job.yaml" --set engine.max_seqs=9 --set engine.kv_cache_tokens=160 2>"$WORK/log"
grep -q "preemptions: [1-9]" "$WORK/log" || fail "expected preemptions with a 160-token KV cache: $(cat "$WORK/log")"
