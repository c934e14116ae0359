#!/usr/bin/env bash
# A model folder whose config.json asks for something tpbatch does not implement (another
# architecture, another rope scaling, another activation, ...; issue 15 made yarn, dynamic NTK,
# longrope and Llama's mlp_bias work: tests/mpi/test_model_families_beyond_llama_match_reference.sh) fails the run with exit status 1 and
# a message that names the option and its value, instead of computing something else.
source "$(dirname "$0")/lib.sh"
"$TPBATCH" make-model "$WORK/base" --preset tiny --layers 2 >/dev/null
"$TPBATCH" make-model "$WORK/qwen2" --preset tiny --layers 2 --architecture Qwen2ForCausalLM >/dev/null
"$TPBATCH" make-model "$WORK/qwen3moe" --preset tiny --layers 2 --architecture Qwen3MoeForCausalLM >/dev/null
printf '{"prompt": "Once upon a time"}\n' >"$WORK/in.jsonl"

# case NAME BASE PYTHON-EDIT WORD...: copy BASE, apply the edit to its config.json (object `c`),
# run, and expect exit 1 with every WORD in the message.
case_() {
  local name=$1 base=$2 edit=$3
  shift 3
  cp -r "$WORK/$base" "$WORK/$name"
  $PY - "$WORK/$name/config.json" "$edit" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
  write_job "$WORK/$name.yaml" "$WORK/$name" "$WORK/in.jsonl" "$WORK/$name.h5" "sampling:" "  max_new_tokens: 4"
  local rc=0
  mpirun_tpbatch 1 "$WORK/$name.yaml" >"$WORK/$name.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { cat "$WORK/$name.log"; fail "$name: exit status $rc, want 1"; }
  for word in "$@"; do
    grep -qF -- "$word" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: the message does not name '$word'"; }
  done
  echo "$name: exit 1: $(grep -F -- "$1" "$WORK/$name.log" | head -1)"
}

case_ architecture base 'c["architectures"] = ["GPT2LMHeadModel"]' GPT2LMHeadModel architectures
case_ gemma3_multimodal base 'c["architectures"] = ["Gemma3ForConditionalGeneration"]' Gemma3ForConditionalGeneration \
  architectures
case_ rope_ntk base 'c["rope_scaling"] = {"rope_type": "ntk", "factor": 4.0}' ntk rope_scaling
# Dynamic NTK is the default rope within max_position_embeddings (supported); with a smaller
# original_max_position_embeddings the base would change mid-sequence.
case_ rope_dynamic_short base \
  'c["rope_scaling"] = {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 128}' dynamic rope_scaling
case_ rope_longrope_factors base \
  'c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}' longrope short_factor
case_ partial_rotary base 'c["partial_rotary_factor"] = 0.5' partial_rotary_factor
case_ hidden_act base 'c["hidden_act"] = "gelu"' gelu hidden_act
case_ mlp_bias_qwen2 qwen2 'c["mlp_bias"] = True' mlp_bias Qwen2ForCausalLM
case_ quantized base 'c["quantization_config"] = {"quant_method": "gptq", "bits": 4}' quantization_config
case_ qwen2_partial_window qwen2 'c.update(use_sliding_window=True, sliding_window=16, max_window_layers=1)' \
  max_window_layers
case_ bad_head_dim base 'c["head_dim"] = 7' head_dim
# Mixture of experts: shared experts (Qwen2-MoE / DeepSeek style) would be left out; top-k above the experts.
case_ moe_shared_experts qwen3moe 'c["shared_expert_intermediate_size"] = 128' shared_expert_intermediate_size
case_ moe_top_k qwen3moe 'c["num_experts_per_tok"] = 9' num_experts_per_tok
