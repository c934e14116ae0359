#!/usr/bin/env bash
# fp8 checkpoints on the CPU, in both formats make-model writes (fp8 with 128x128 block scales,
# compressed-tensors with per-channel scales): each runs with its weights kept as fp8 (a third of
# the float32 twin's bytes here) and gives the same greedy tokens as its dequantized float32 twin,
# logprobs within 1e-5 (the same fp32 arithmetic: the GEMM dequantizes each slice to exactly the
# twin's values), at TP=1, TP=2 (intermediate 301: an uneven split whose row-parallel shard starts
# inside a scale block), PP=2 and DP=2.
source "$(dirname "$0")/../e2e/lib.sh"
E2E="$HERE/../e2e"
weights_mib() { sed -n 's/.*weights: \([0-9.]*\) MiB per rank.*/\1/p' "$1" | head -1; }
shape=(--hidden-size 256 --intermediate-size 301 --layers 3 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 500
  --seed 3)
for scheme in fp8-block fp8-channel; do
  "$TPBATCH" make-model "$WORK/$scheme" "${shape[@]}" --quantize "$scheme" >/dev/null
  "$TPBATCH" make-model "$WORK/$scheme-twin" "${shape[@]}" --quantize "$scheme" --dequantize >/dev/null
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
    grep -q "F8_E4M3" "$WORK/$scheme.log" || { cat "$WORK/$scheme.log"; fail "$scheme: weights not kept as fp8"; }
    $PY "$E2E/compare_runs.py" "$WORK/$scheme.h5" "$WORK/$scheme-twin.h5" --tol 1e-5 --expect-rows 9 ||
      fail "$scheme at np $1 tensor $2 pipeline $3 vs its dequantized twin"
    if [ "$layout" = "1 1 1" ]; then
      q=$(weights_mib "$WORK/$scheme.log")
      t=$(weights_mib "$WORK/$scheme-twin.log")
      # fp8 linear layers (a quarter) beside the float32 embedding, norms and scales.
      $PY -c "import sys; r = $q / $t; print('$scheme weights %s MiB vs twin %s MiB: ratio %.3f' % ('$q', '$t', r)); sys.exit(0 if r < 0.36 else 1)" ||
        fail "$scheme weights $q MiB vs the float32 twin $t MiB: not kept as fp8"
    fi
  done
done
echo PASS
