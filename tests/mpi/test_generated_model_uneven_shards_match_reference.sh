#!/usr/bin/env bash
# A generated model whose shapes force KV-head replication (2 KV heads at TP 4 and 8) and uneven
# splits (intermediate 100, vocab 500 at TP 8): TP=1/2/4/8 all match the reference. Also checks
# the Megatron schedule from the communicator counters: per step, 2 allreduces per layer plus
# one for the vocab-parallel embedding, and one allgather for the LM head's shard statistics.
source "$(dirname "$0")/../e2e/lib.sh"
E2E="$HERE/../e2e"
"$TPBATCH" make-model "$WORK/model" --preset tiny --layers 3 --heads 8 --kv-heads 2 --intermediate-size 100 \
  --vocab-size 500 --seed 7 >/dev/null
write_job "$WORK/job.yaml" "$WORK/model" "$E2E/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 24" "  ignore_eos: true" "engine:" "  max_seqs: 64"
for layout in "1 1" "2 2" "4 4" "8 8" "8 4"; do
  set -- $layout
  echo "== np $1, tensor $2"
  mpirun_tpbatch "$1" "$WORK/job.yaml" --set parallel.tensor="$2" 2>"$WORK/log"
  $PY "$E2E/check_against_reference.py" "$WORK/out.h5" --reference "$REFERENCE" --model "$WORK/model" \
    --max-new-tokens 24 --expect-rows 9
  if [ "$2" -gt 1 ]; then
    $PY - "$WORK/log" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
ar = re.search(r"tensor-parallel allreduce: (\d+) calls.*\(([\d.]+) per step\)", log)
ag = re.search(r"tensor-parallel allgather: (\d+) calls.*\(([\d.]+) per step\)", log)
assert ar and ag, log
layers = 3
assert float(ar.group(2)) == 2 * layers + 1, f"allreduces per step {ar.group(2)}, want {2*layers+1}"
assert float(ag.group(2)) == 1, f"allgathers per step {ag.group(2)}, want 1 (greedy: no full-logits gather)"
print("collectives per step:", ar.group(2), "allreduce,", ag.group(2), "allgather")
PY
  fi
done
