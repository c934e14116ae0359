#!/usr/bin/env bash
# Score rows are tokenized as lm-evaluation-harness does (input.score_tokenization: joint, the
# default): " Lily." after "...a little girl named" is scored as the tokens "▁Lily" "." of the
# whole sentence (logprob about -0.15), whatever side of the boundary the space is on, and equals
# completion_tokens given as ids; `separate` keeps the old tokenization ("▁" "▁Lily" ".", about
# -19). Sums are checked against the independent double-precision reference.
source "$(dirname "$0")/lib.sh"
need_stories
ctx="Once upon a time, there was a little girl named"
lily=$("$PY" -c "import json; v=json.load(open('$STORIES/tokenizer.json'))['model']['vocab']; print(v['▁Lily'], v['.'], sep=',')")
cat >"$WORK/in.jsonl" <<JSONL
{"id": "lily", "prompt": "$ctx", "completion": " Lily."}
{"id": "lily_space_in_context", "prompt": "$ctx ", "completion": "Lily."}
{"id": "lily_ids", "prompt": "$ctx", "completion_tokens": [$lily]}
JSONL
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "task: score"
"$TPBATCH" "$WORK/job.yaml"
$PY "$HERE/score_tokenization_check.py" "$WORK/out.h5" "$REFERENCE" "$STORIES" \
  "lily=▁Lily,.:-1:0" "lily_space_in_context=▁Lily,.:-1:0" "lily_ids=▁Lily,.:-1:0"
# The same rows at TP=2 with one-token prefill chunks: the same tokens and sums.
mpirun_tpbatch 2 "$WORK/job.yaml" --set parallel.tensor=2 --set engine.max_batch_tokens=3
$PY "$HERE/score_tokenization_check.py" "$WORK/out.h5" "$REFERENCE" "$STORIES" \
  "lily=▁Lily,.:-1:0" "lily_space_in_context=▁Lily,.:-1:0" "lily_ids=▁Lily,.:-1:0"
"$TPBATCH" "$WORK/job.yaml" --set input.score_tokenization=separate
$PY "$HERE/score_tokenization_check.py" "$WORK/out.h5" "$REFERENCE" "$STORIES" \
  "lily=▁,▁Lily,.:-40:-5" "lily_ids=▁Lily,.:-1:0"
echo "PASS: lm-eval tokenization of score rows"
