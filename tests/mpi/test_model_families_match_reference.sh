#!/usr/bin/env bash
# Every supported model family, on a generated model of its shape, matches an independent
# reference that follows Hugging Face transformers' modeling code (scripts/hf_reference.py) at TP=1
# and TP=2: greedy tokens identical, logprobs within 1e-4 (fp32).
#   llama    tiny preset: tied embeddings, one eos id
#   llama3   untied, rope_scaling llama3 (original_max_position_embeddings 64, so all three frequency
#            bands, unscaled / smoothed / scaled, occur; head_dim 16), several eos ids; plus a run
#            without ignore_eos that must stop at the first of any of them
#   qwen2    q/k/v biases (sharded with their columns under TP), tied like Qwen2/2.5 0.5B-1.5B
#   mistral  untied, sliding_window 256 (longer than every sequence here)
# At TP=1 the C++ reference (tests/reference/tpbatch_reference) is also checked against the Python one.
#
# The reference backend: numpy (default; needs only Debian's python3-numpy and python3-h5py), or
# transformers itself with TPBATCH_REFERENCE_BACKEND=hf, installed into $TPBATCH_BUILD_DIR/pyenv when
# absent. Not the default: PyPI's torch wheel is a CUDA build (539 MB) that does not import without
# its nvidia-* dependencies, about 3 GB more, too heavy for CI on 2 cores.
source "$(dirname "$0")/../e2e/lib.sh"
E2E="$HERE/../e2e"
REFPY="$HERE/../../scripts/hf_reference.py"
BACKEND=${TPBATCH_REFERENCE_BACKEND:-numpy}
NEW=16

$PY -c "import numpy, h5py" 2>/dev/null || { echo "SKIP: $PY lacks numpy or h5py"; exit 77; }
if [ "$BACKEND" = hf ]; then
  VENV="$TPBATCH_BUILD_DIR/pyenv"
  if ! "$VENV/bin/python" -c "import torch, transformers" 2>/dev/null; then
    { $PY -m venv --system-site-packages "$VENV" && "$VENV/bin/pip" install --quiet torch transformers; } ||
      { echo "SKIP: cannot install torch and transformers into $VENV"; exit 77; }
  fi
  PY="$VENV/bin/python"
fi
ref() { $PY "$REFPY" --backend "$BACKEND" "$@"; }

# patch_json (tests/e2e/lib.sh) runs $PY as set above.

"$TPBATCH" make-model "$WORK/llama" --preset tiny --seed 11 >/dev/null
"$TPBATCH" make-model "$WORK/llama3" --preset tiny --heads 4 --kv-heads 2 --tie-word-embeddings 0 \
  --rope-scaling llama3 --seed 12 >/dev/null
patch_json "$WORK/llama3/config.json" \
  'c["rope_scaling"].update(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64)'
"$TPBATCH" make-model "$WORK/qwen2" --preset tiny --architecture Qwen2ForCausalLM --tie-word-embeddings 1 \
  --seed 13 >/dev/null
"$TPBATCH" make-model "$WORK/mistral" --preset tiny --architecture MistralForCausalLM --tie-word-embeddings 0 \
  --seed 14 >/dev/null
patch_json "$WORK/mistral/config.json" 'c["sliding_window"] = 256'

# The llama3 scaling must matter here: without it the reference's answer changes.
mkdir "$WORK/llama3-unscaled"
ln -s "$WORK/llama3/model.safetensors" "$WORK/llama3-unscaled/model.safetensors"
cp "$WORK/llama3/config.json" "$WORK/llama3-unscaled/config.json"
patch_json "$WORK/llama3-unscaled/config.json" 'c["rope_scaling"] = None'
IDS=1,300,301,302,303,304,305,306,307,308,309,310
$PY - <(ref generate "$WORK/llama3" --ids $IDS --max-new-tokens $NEW) \
  <(ref generate "$WORK/llama3-unscaled" --ids $IDS --max-new-tokens $NEW) <<'PY'
import json, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:3])
d = max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"]))
assert a["tokens"] != b["tokens"] or d > 1e-2, f"llama3 rope scaling changes nothing here (max diff {d})"
print(f"llama3 rope scaling matters: tokens differ: {a['tokens'] != b['tokens']}, max |logprob diff| {d:.3g}")
PY

write_job "$WORK/job.yaml" MODEL "$E2E/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: $NEW" "  ignore_eos: true" "engine:" "  max_seqs: 64"
for family in llama llama3 qwen2 mistral; do
  for tp in 1 2; do
    echo "== $family, tensor $tp"
    mpirun_tpbatch "$tp" "$WORK/job.yaml" --set model="$WORK/$family" --set parallel.tensor="$tp" 2>"$WORK/log" ||
      { cat "$WORK/log"; fail "$family at TP=$tp: tpbatch failed"; }
    extra=()
    [ "$tp" = 1 ] && extra=(--cpp-reference "$REFERENCE")
    ref check "$WORK/out.h5" --model "$WORK/$family" --max-new-tokens $NEW --expect-rows 9 "${extra[@]}" ||
      fail "$family at TP=$tp does not match the reference"
  done
  [ "$family" = llama3 ] && cp "$WORK/out.h5" "$WORK/llama3-ignore-eos.h5"
done

# Several eos ids (as Llama-3.1 has: a list in config.json and generation_config.json): pick two
# tokens the greedy continuations reach mid-way, make them eos ids beside 2, and rerun without ignore_eos.
EOS=$($PY - "$WORK/llama3-ignore-eos.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
picked = []
for i in range(f["done"].shape[0]):
    toks = [int(t) for t in f["output_tokens"][i]]
    for j in range(3, len(toks) - 3):
        if toks[j] not in toks[:j] and toks[j] not in picked and toks[j] != 2:
            picked.append(toks[j]); break
    if len(picked) == 2: break
print(f"[2, {picked[0]}, {picked[1]}]")
PY
)
echo "== llama3, eos ids $EOS, stopping at eos"
patch_json "$WORK/llama3/config.json" "c['eos_token_id'] = $EOS"
patch_json "$WORK/llama3/generation_config.json" "c['eos_token_id'] = $EOS"
for tp in 1 2; do
  mpirun_tpbatch "$tp" "$WORK/job.yaml" --set model="$WORK/llama3" --set parallel.tensor="$tp" \
    --set sampling.ignore_eos=false 2>"$WORK/log" || { cat "$WORK/log"; fail "llama3 eos run at TP=$tp failed"; }
  ref check "$WORK/out.h5" --model "$WORK/llama3" --max-new-tokens $NEW --expect-rows 9 --stop-at-eos \
    --min-eos-rows 2 || fail "llama3 at TP=$tp does not stop at its eos ids"
done
echo "all families match the $BACKEND reference at TP=1 and TP=2"
