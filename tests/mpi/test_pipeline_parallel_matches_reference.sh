#!/usr/bin/env bash
# Pipeline parallelism: (np, tensor, pipeline, ranks_per_node) = (4,2,2,2) (4,1,4,1) (5,1,5,1:
# one layer per stage) (8,2,2,2: TP x PP x DP) reproduce the reference token for token, and the
# engine reports each stage's busy fraction.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
E2E="$HERE/../e2e"
write_job "$WORK/job.yaml" "$STORIES" "$E2E/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true"
for layout in "4 2 2 2" "4 1 4 1" "5 1 5 1" "8 2 2 2" "3 1 3 0"; do
  set -- $layout
  echo "== np $1, tensor $2, pipeline $3, ranks_per_node $4"
  mpirun_tpbatch "$1" "$WORK/job.yaml" --set parallel.tensor="$2" --set parallel.pipeline="$3" \
    --set parallel.ranks_per_node="$4" 2>"$WORK/log"
  grep "busy fraction" "$WORK/log" || fail "no pipeline busy fraction reported"
  $PY -c "import h5py,sys; a=h5py.File('$WORK/out.h5').attrs; sys.exit(0 if a['pipeline_parallel']==$3 else 'pipeline attr')"
  $PY "$E2E/check_against_reference.py" "$WORK/out.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
done
