#!/usr/bin/env bash
# A Mistral-shaped model with a small sliding_window (16): rows whose attention never reaches past the
# window match the reference; a row that would (prompt + max_new_tokens - 1 > 16 tokens fed to the
# model) is either honoured (matches the reference, which applies the window as transformers does:
# query i sees keys j with i - 16 < j <= i) or refused with an error row naming the sliding window.
# Never silently computed with full attention. TP=1 and TP=2.
source "$(dirname "$0")/../e2e/lib.sh"
REFPY="$HERE/../../scripts/hf_reference.py"
$PY -c "import numpy, h5py" 2>/dev/null || { echo "SKIP: $PY lacks numpy or h5py"; exit 77; }

"$TPBATCH" make-model "$WORK/mistral" --preset tiny --architecture MistralForCausalLM --tie-word-embeddings 0 \
  --seed 14 >/dev/null
$PY - "$WORK/mistral/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["sliding_window"] = 16; json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
# Token-id prompts, so the lengths are exact. With max_new_tokens 8 the model is fed
# prompt + 7 tokens: 13 (fits), 16 (exactly the window: still no difference), 37 and 47 (past it).
$PY - >"$WORK/rows.jsonl" <<'PY'
import json
for rid, n in (("short", 6), ("boundary", 9), ("long", 30), ("longer", 40)):
    print(json.dumps({"id": rid, "tokens": [1] + [300 + (7 * i) % 200 for i in range(n - 1)]}))
PY
cat >"$WORK/job.yaml" <<EOF
model: $WORK/mistral
input:
  path: $WORK/rows.jsonl
  tokens_field: tokens
output:
  path: $WORK/out.h5
  if_exists: overwrite
sampling:
  max_new_tokens: 8
  ignore_eos: true
EOF
for tp in 1 2; do
  echo "== mistral, sliding_window 16, tensor $tp"
  mpirun_tpbatch "$tp" "$WORK/job.yaml" --set parallel.tensor="$tp" 2>"$WORK/log" ||
    { cat "$WORK/log"; fail "tpbatch failed at TP=$tp"; }
  $PY "$REFPY" --backend numpy check "$WORK/out.h5" --model "$WORK/mistral" --max-new-tokens 8 --expect-rows 4 \
    --refusal "sliding window" --must-not-refuse short ||
    fail "TP=$tp: a row past the sliding window was neither honoured nor refused"
done
