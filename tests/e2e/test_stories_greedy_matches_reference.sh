#!/usr/bin/env bash
# One rank, greedy, ignore_eos, 64 new tokens on the real stories260K: tokens identical to the
# independent double-precision reference, logprobs within 1e-4 (with and without mpirun).
source "$(dirname "$0")/lib.sh"
need_stories
write_job "$WORK/job.yaml" "$STORIES" "$HERE/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true"
"$TPBATCH" "$WORK/job.yaml"
$PY "$HERE/check_against_reference.py" "$WORK/out.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
mpirun_tpbatch 1 "$WORK/job.yaml" --set output.path="$WORK/out_mpi.h5"
$PY "$HERE/check_against_reference.py" "$WORK/out_mpi.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
