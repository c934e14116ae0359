#!/usr/bin/env bash
# transformers >= 5 saves RoPE settings as config.json "rope_parameters": {"rope_type", "rope_theta",
# "factor", ...} instead of top-level "rope_theta" and "rope_scaling" (checked with transformers 5.24:
# save_pretrained of a Llama-3 config writes only rope_parameters). Such a folder must give the
# reference's tokens (RoPE theta 500000 and llama3 scaling read from rope_parameters), or be refused
# naming rope_parameters: never be run with the default theta 10000 and no scaling.
source "$(dirname "$0")/lib.sh"
REFPY="$HERE/../../scripts/hf_reference.py"
$PY -c "import numpy, h5py" 2>/dev/null || { echo "SKIP: $PY lacks numpy or h5py"; exit 77; }
"$TPBATCH" make-model "$WORK/model" --preset tiny --heads 4 --kv-heads 2 --tie-word-embeddings 0 --seed 21 >/dev/null
$PY - "$WORK/model/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("rope_theta", None)
c.pop("rope_scaling", None)
c["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
write_job "$WORK/job.yaml" "$WORK/model" "$HERE/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 16" "  ignore_eos: true"
rc=0
mpirun_tpbatch 1 "$WORK/job.yaml" >"$WORK/log" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
  [ "$rc" = 1 ] && grep -q rope_parameters "$WORK/log" || { cat "$WORK/log"; fail "exit $rc without naming rope_parameters"; }
  echo "refused: $(grep rope_parameters "$WORK/log" | head -1)"
  exit 0
fi
$PY "$REFPY" --backend numpy check "$WORK/out.h5" --model "$WORK/model" --max-new-tokens 16 --expect-rows 9 ||
  fail "rope_parameters ignored: tokens differ from the reference"
