#!/usr/bin/env bash
# Mixture-of-experts models on generated models of each family's shape match the
# independent numpy re-implementation of transformers' modeling code (scripts/hf_reference.py) at
# TP=1, TP=2 and PP=2: greedy tokens identical, logprobs within 1e-3.
#   mixtral        MixtralForCausalLM: 4 experts, top-2 always renormalised, every layer sparse,
#                  sliding window 8 (shorter than the prompts plus 16 new tokens)
#   qwen3moe       Qwen3MoeForCausalLM: q/k norms, 4 experts of moe_intermediate_size 48, top-2,
#                  norm_topk_prob true, layer 1 dense (mlp_only_layers) with intermediate_size
#   qwen3moe-raw   the same weights with norm_topk_prob false (top-k softmax weights as they are)
#   qwen2moe       Qwen2MoeForCausalLM: q/k/v biases, 4 experts of 24, top-2 not renormalised, a
#                  shared expert of 96 gated by sigmoid(shared_expert_gate . h), layer 2 dense;
#                  also under parallel.experts: expert at TP=2 (whole routed experts per rank, the
#                  shared expert still split like the dense MLP)
# Under TP each expert's gate/up rows and down columns are split like the dense MLP (one allreduce
# per layer); under PP the dense layer and the sparse ones fall on different stages.
# Routing matters: top-1 instead of top-2, and norm_topk_prob, each change the reference's answer.
# Cross-checked once by hand against transformers 4.46.3 (MixtralForCausalLM; Qwen2MoeForCausalLM:
# identical tokens, max |logprob diff| 3e-6; 4.46 has no Qwen3-MoE classes).
source "$(dirname "$0")/../e2e/lib.sh"
need_numpy_h5py

generated_model mixtral --architecture MixtralForCausalLM --layers 4 --heads 4 --kv-heads 2 --intermediate-size 64 \
  --experts 4 --experts-per-token 2 --tie-word-embeddings 0 --seed 31
patch_json "$WORK/mixtral/config.json" 'c["sliding_window"] = 8'
generated_model qwen3moe --architecture Qwen3MoeForCausalLM --layers 4 --head-dim 32 --intermediate-size 64 \
  --experts 4 --experts-per-token 2 --moe-intermediate-size 48 --norm-topk-prob 1 --mlp-only-layers 1 --seed 32
model_variant qwen3moe-raw qwen3moe 'c["norm_topk_prob"] = False'
generated_model qwen2moe --architecture Qwen2MoeForCausalLM --layers 4 --heads 4 --kv-heads 2 --intermediate-size 64 \
  --experts 4 --experts-per-token 2 --moe-intermediate-size 24 --norm-topk-prob 0 --mlp-only-layers 2 --seed 33

reference_matters mixtral 'c["num_experts_per_tok"] = 1' "top-2 routing (vs top-1)"
reference_matters qwen3moe 'c["norm_topk_prob"] = False' "norm_topk_prob"
reference_matters qwen2moe 'c["shared_expert_intermediate_size"] = 0' "the shared expert"

write_reference_job
# qwen3moe-raw differs from qwen3moe only in the routing weights (the layouts are the same code
# path): TP=2 alone keeps the test short.
for family in ${FAMILIES:-mixtral qwen3moe qwen3moe-raw qwen2moe}; do
  layouts=("1 1" "2 1" "1 2")
  [ "$family" = qwen3moe-raw ] && layouts=("2 1")
  for layout in "${layouts[@]}"; do
    matches_reference "$family" $layout
  done
  [ "$family" = qwen2moe ] && matches_reference "$family" 2 1 --set parallel.experts=expert
done
echo "Mixtral, Qwen3-MoE (norm_topk_prob both ways, a dense layer) and Qwen2-MoE (a shared expert) match the numpy reference at TP=1, TP=2 and PP=2"
