#!/usr/bin/env bash
# Phi-3 longrope beyond original_max_position_embeddings (32 here, max_position_embeddings 128):
# Hugging Face turns a sequence by the short factors while it is within 32 tokens and every
# position of a longer one by the long factors. tpbatch matches the numpy re-implementation of
# transformers' modelling code (scripts/hf_reference.py, which runs each forward over the whole
# sequence) at TP=1, TP=2 and PP=2:
#   generate  prompts of 10 (never crosses), 24 and 32 tokens (generation crosses: the sequence is
#             computed again with the long factors, 32 cached tokens each), 33 and 40 (long from
#             the start); greedy tokens identical, logprobs within 1e-3, and the run's summary
#             counts the 64 recomputed tokens
#   score     prompt + completion of 30 tokens (short) and of 40 (long, the prompt's positions too)
# The long factors matter: with long_factor = short_factor the reference's answer changes.
source "$(dirname "$0")/../e2e/lib.sh"
need_numpy_h5py

generated_model phi3 --architecture Phi3ForCausalLM --heads 4 --kv-heads 2 --tie-word-embeddings 0 --seed 23
patch_json "$WORK/phi3/config.json" '
c["max_position_embeddings"] = 128; c["original_max_position_embeddings"] = 32
c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0 + 0.25 * i for i in range(8)],
                     "long_factor": [4.0 + i for i in range(8)]}'
reference_matters phi3 'c["rope_scaling"]["long_factor"] = c["rope_scaling"]["short_factor"]' "the long factors"

$PY - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
ids = lambda n, first: [1] + [first + (7 * i) % 200 for i in range(n - 1)]
with open(f"{work}/generate.jsonl", "w") as f:
    for n in (10, 24, 32, 33, 40):
        f.write(json.dumps({"id": f"prompt{n}", "ids": ids(n, 260)}) + "\n")
with open(f"{work}/score.jsonl", "w") as f:
    for n, m in ((20, 10), (20, 20)):
        f.write(json.dumps({"id": f"score{n + m}", "ids": ids(n, 270), "completion_tokens": ids(m + 1, 280)[1:]}) + "\n")
PY
write_job "$WORK/generate.yaml" "$WORK/phi3" "$WORK/generate.jsonl" "$WORK/generate.h5" \
  "sampling:" "  max_new_tokens: $NEW" "  ignore_eos: true" "engine:" "  max_seqs: 8"
write_job "$WORK/score.yaml" "$WORK/phi3" "$WORK/score.jsonl" "$WORK/score.h5" "task: score"

for layout in "1 1" "2 1" "1 2"; do
  read -r t p <<<"$layout"
  echo "== TP=$t PP=$p"
  mpirun_tpbatch $((t * p)) "$WORK/generate.yaml" --set input.tokens_field=ids --set parallel.tensor="$t" \
    --set parallel.pipeline="$p" 2>"$WORK/log" || { cat "$WORK/log"; fail "generate at TP=$t PP=$p failed"; }
  grep -q "long rope recomputed tokens: 64$" "$WORK/log" ||
    fail "TP=$t PP=$p: the summary does not count 64 recomputed tokens: $(grep 'replica 0:' "$WORK/log")"
  ref_numpy check "$WORK/generate.h5" --model "$WORK/phi3" --max-new-tokens $NEW --expect-rows 5 --tol 1e-3 ||
    fail "generate at TP=$t PP=$p does not match the reference"
  mpirun_tpbatch $((t * p)) "$WORK/score.yaml" --set input.tokens_field=ids --set parallel.tensor="$t" \
    --set parallel.pipeline="$p" 2>"$WORK/log" || { cat "$WORK/log"; fail "score at TP=$t PP=$p failed"; }
  ref_numpy score-check "$WORK/score.h5" --model "$WORK/phi3" --expect-rows 2 --tol 1e-3 ||
    fail "score at TP=$t PP=$p does not match the reference"
done
echo "Phi-3 longrope past the original context matches the numpy reference at TP=1, TP=2 and PP=2"
