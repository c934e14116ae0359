#!/usr/bin/env bash
# The score task at TP=1 and TP=2 (and chunked, with a tiny max_batch_tokens): completion
# logprobs, logprob_sum and is_greedy match the reference; without a completion the prompt's
# own tokens are scored (perplexity).
source "$(dirname "$0")/lib.sh"
need_stories
write_job "$WORK/job.yaml" "$STORIES" "$HERE/prompts_score.jsonl" "$WORK/out.h5" "task: score"
"$TPBATCH" "$WORK/job.yaml"
$PY "$HERE/check_against_reference.py" "$WORK/out.h5" --task score --tol 2e-4 --reference "$REFERENCE" --model "$STORIES"
mpirun_tpbatch 2 "$WORK/job.yaml" --set parallel.tensor=2 --set engine.max_batch_tokens=5
$PY "$HERE/check_against_reference.py" "$WORK/out.h5" --task score --tol 2e-4 --reference "$REFERENCE" --model "$STORIES"
write_job "$WORK/ppl.yaml" "$STORIES" "$HERE/prompts_mixed.jsonl" "$WORK/ppl.h5" "task: score"
mpirun_tpbatch 2 "$WORK/ppl.yaml" --set parallel.tensor=2 --set engine.max_batch_tokens=16
$PY "$HERE/check_against_reference.py" "$WORK/ppl.h5" --task perplexity --tol 2e-4 --reference "$REFERENCE" --model "$STORIES"
