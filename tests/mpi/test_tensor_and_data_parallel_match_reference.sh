#!/usr/bin/env bash
# TP=2/4/8, DP=2, TP=2xDP=2, TP=4xDP=2, TP=2xDP=4 on stories260K: greedy tokens identical to the
# reference (and so to one rank), logprobs within 1e-4.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
E2E="$HERE/../e2e"
write_job "$WORK/job.yaml" "$STORIES" "$E2E/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true"
for layout in "2 2" "4 4" "8 8" "2 1" "4 2" "8 4" "8 2"; do
  set -- $layout
  echo "== np $1, tensor $2"
  mpirun_tpbatch "$1" "$WORK/job.yaml" --set parallel.tensor="$2" --set output.path="$WORK/o.h5"
  $PY -c "import h5py,sys; a=h5py.File('$WORK/o.h5').attrs; sys.exit(0 if (a['tensor_parallel'],a['data_parallel'],a['world_size'])==($2,$1//$2,$1) else 'layout attrs wrong')"
  $PY "$E2E/check_against_reference.py" "$WORK/o.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
done
