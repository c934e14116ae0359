#!/usr/bin/env bash
# 4-bit checkpoints on the CPU, in the three formats make-model writes (awq gemm, gptq, and
# compressed-tensors W4A16 pack-quantized; group size 128): an independent numpy reading of each
# file (int4_unpack_reference.py, from the formats' own dequantize code) gives the dequantized
# twin's float32 weights exactly; then each runs with its weights kept as 4-bit values, scales
# and zero points and gives the same greedy tokens as its twin, logprobs within 1e-5 (the same
# fp32 arithmetic: the GEMM dequantizes each slice to exactly the twin's values), at TP=1, TP=2
# (intermediate 640 = 5 groups: the row-parallel down_proj shard starts inside group 2), PP=2
# and DP=2.
source "$(dirname "$0")/../e2e/lib.sh"
E2E="$HERE/../e2e"
weights_mib() { sed -n 's/.*weights: \([0-9.]*\) MiB per rank.*/\1/p' "$1" | head -1; }
shape=(--hidden-size 256 --intermediate-size 640 --layers 3 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 500
  --seed 5)
for scheme in awq gptq w4a16; do
  "$TPBATCH" make-model "$WORK/$scheme" "${shape[@]}" --quantize "$scheme" >/dev/null
  "$TPBATCH" make-model "$WORK/$scheme-twin" "${shape[@]}" --quantize "$scheme" --dequantize >/dev/null
  $PY "$HERE/../mpi/int4_unpack_reference.py" "$scheme" "$WORK/$scheme" "$WORK/$scheme-twin" ||
    fail "$scheme: make-model's file disagrees with the format's reference dequantization"
  for model in "$scheme" "$scheme-twin"; do
    write_job "$WORK/$model.yaml" "$WORK/$model" "$E2E/prompts_mixed.jsonl" "$WORK/$model.h5" \
      "sampling:" "  max_new_tokens: 24" "  ignore_eos: true"
  done
  for layout in "1 1 1" "2 2 1" "2 1 2" "2 1 1"; do
    set -- $layout
    echo "== $scheme: np $1, tensor $2, pipeline $3"
    for model in "$scheme" "$scheme-twin"; do
      mpirun_tpbatch "$1" "$WORK/$model.yaml" --set parallel.tensor="$2" --set parallel.pipeline="$3" \
        2>"$WORK/$model.log" || { cat "$WORK/$model.log"; fail "$model at np $1 tensor $2 pipeline $3 exited $?"; }
    done
    grep -q "linear layers I4" "$WORK/$scheme.log" || { cat "$WORK/$scheme.log"; fail "$scheme: weights not kept as int4"; }
    $PY "$E2E/compare_runs.py" "$WORK/$scheme.h5" "$WORK/$scheme-twin.h5" --tol 1e-5 --expect-rows 9 ||
      fail "$scheme at np $1 tensor $2 pipeline $3 vs its dequantized twin"
    if [ "$layout" = "1 1 1" ]; then
      q=$(weights_mib "$WORK/$scheme.log")
      t=$(weights_mib "$WORK/$scheme-twin.log")
      # 4-bit linear layers (0.5 + 8/128 bytes a weight against 4) beside the float32 embedding and norms.
      $PY -c "import sys; r = $q / $t; print('$scheme weights %s MiB vs twin %s MiB: ratio %.3f' % ('$q', '$t', r)); sys.exit(0 if r < 0.30 else 1)" ||
        fail "$scheme weights $q MiB vs the float32 twin $t MiB: not kept as 4-bit"
    fi
  done
done
echo PASS
