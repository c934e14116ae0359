#!/usr/bin/env bash
# Qwen3, Phi-3, Gemma, Gemma 2 and Gemma 3 (text), and the yarn / dynamic / longrope rope scalings, on
# generated models of each family's shape, match the independent numpy re-implementation of
# transformers' modeling code (scripts/hf_reference.py) at TP=1, TP=2 and PP=2: greedy tokens
# identical, logprobs within 1e-3 (fp32).
#   qwen3        per-head q/k RMSNorm before RoPE, head_dim 32 != hidden / heads (64 / 8), untied
#   qwen3-yarn   the same weights, rope_scaling yarn factor 4 (attention factor 1.139 on q·k)
#   llama-dyn    Llama with dynamic NTK (the default rope within the context) and mlp_bias
#   phi3         fused qkv_proj / gate_up_proj split per rank, longrope short/long factors
#                (max_position_embeddings 4x original, so the attention factor is not 1), sliding window 8
#   gemma        (1 + w) norms, sqrt(hidden) embeddings, GeLU-tanh, multi-query attention (1 KV head,
#                replicated under TP=2), head_dim 32 != hidden / heads, scores scaled by head_dim
#   gemma2       (1 + w) norms, sqrt(hidden) embeddings, GeLU-tanh, sandwich norms, query_pre_attn_scalar
#                24, attention soft-cap 0.8 and final soft-cap 6 (both bite), sliding window 8 on even layers
#   gemma3       q/k norms, sliding window 8 on all but every 2nd layer, local rope base 100 vs 1e6 global
#                with linear scaling on the global layers only
# The sliding windows (8) are shorter than most prompts of prompts_mixed.jsonl plus 16 new tokens.
# Cross-checked once by hand against transformers 4.46.3 itself (Debian python3-torch 1.13, pip
# transformers in a venv; hf_reference.py --backend hf generate vs --backend numpy, same models):
# gemma2 and phi3 tokens identical, max |logprob diff| 4.8e-7 and 8.9e-6. 4.46 has no Qwen3 or
# Gemma 3 classes: those follow the numpy reference only. gemma (GemmaForCausalLM): 4.46.3 and the
# numpy reference give identical tokens, max |logprob diff| 4e-6. Yarn: 4.46 computes the correction
# range from max_position_embeddings (a TODO there), later versions from rope_scaling's
# original_max_position_embeddings, as tpbatch and the numpy reference do; with the two equal,
# 4.46 agrees (7.9e-6).
# For each scaling or soft-cap, a check that it matters: without it the reference's answer changes.
source "$(dirname "$0")/../e2e/lib.sh"
need_numpy_h5py

generated_model qwen3 --architecture Qwen3ForCausalLM --head-dim 32 --tie-word-embeddings 0 --seed 21
model_variant qwen3-yarn qwen3 \
  'c["max_position_embeddings"] = 512; c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}'
generated_model llama-dyn --heads 4 --kv-heads 2 --seed 22
patch_json "$WORK/llama-dyn/config.json" 'c["rope_scaling"] = {"type": "dynamic", "factor": 2.0}; c["mlp_bias"] = True'
$PY - "$WORK/llama-dyn" <<'PY'
# mlp_bias: add gate/up/down biases to the generated checkpoint (make-model writes none).
import json, struct, sys, numpy as np
path = sys.argv[1] + "/model.safetensors"
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n]); data = raw[8 + n:]
tensors = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4").reshape(v["shape"])
           for k, v in header.items() if k != "__metadata__"}
rng = np.random.default_rng(5)
for l in range(5):
    p = f"model.layers.{l}.mlp."
    tensors[p + "gate_proj.bias"] = rng.normal(0, 0.3, 172).astype("<f4")
    tensors[p + "up_proj.bias"] = rng.normal(0, 0.3, 172).astype("<f4")
    tensors[p + "down_proj.bias"] = rng.normal(0, 0.3, 64).astype("<f4")
out, off, blobs = {}, 0, []
for k in sorted(tensors):
    b = tensors[k].tobytes(); out[k] = {"dtype": "F32", "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
    off += len(b); blobs.append(b)
h = json.dumps(out).encode(); h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
generated_model phi3 --architecture Phi3ForCausalLM --heads 4 --kv-heads 2 --tie-word-embeddings 0 --seed 23
patch_json "$WORK/phi3/config.json" '
import math
c["sliding_window"] = 8; c["original_max_position_embeddings"] = 128
c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0 + 0.25 * i for i in range(8)],
                     "long_factor": [4.0 + i for i in range(8)]}'
generated_model gemma --architecture GemmaForCausalLM --heads 4 --kv-heads 1 --head-dim 32 --seed 26
generated_model gemma2 --architecture Gemma2ForCausalLM --heads 4 --kv-heads 2 --head-dim 24 --seed 24
patch_json "$WORK/gemma2/config.json" \
  'c.update(sliding_window=8, query_pre_attn_scalar=24, attn_logit_softcapping=0.8, final_logit_softcapping=6.0)'
generated_model gemma3 --architecture Gemma3ForCausalLM --heads 4 --kv-heads 1 --head-dim 32 --seed 25
patch_json "$WORK/gemma3/config.json" \
  'c.update(sliding_window=8, sliding_window_pattern=2, rope_theta=1e6, rope_local_base_freq=100.0, query_pre_attn_scalar=16, rope_scaling={"rope_type": "linear", "factor": 4.0})'

reference_matters qwen3-yarn 'c["rope_scaling"] = None' "yarn rope scaling"
reference_matters phi3 'c["rope_scaling"] = None; c.pop("original_max_position_embeddings")' "longrope scaling"
reference_matters gemma2 'c["attn_logit_softcapping"] = None' "attention soft-capping"
reference_matters gemma2 'c["final_logit_softcapping"] = None' "final soft-capping"
reference_matters gemma3 'c["rope_local_base_freq"] = 1e6' "gemma3 local rope base"

write_reference_job
for family in ${FAMILIES:-qwen3 qwen3-yarn llama-dyn phi3 gemma gemma2 gemma3}; do
  for layout in "1 1" "2 1" "1 2"; do
    matches_reference "$family" $layout
  done
done
echo "Qwen3, Phi-3, Gemma, Gemma 2, Gemma 3, yarn, dynamic and longrope match the numpy reference at TP=1, TP=2 and PP=2"
