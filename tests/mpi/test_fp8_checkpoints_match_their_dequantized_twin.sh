#!/usr/bin/env bash
# fp8 checkpoints on the CPU, in both formats make-model writes (fp8 with 128x128 block scales,
# compressed-tensors with per-channel scales): each runs with its weights kept as fp8 (a third of
# the float32 twin's bytes here) and gives the same greedy tokens as its dequantized float32 twin,
# logprobs within 2e-5 (fp32 arithmetic on the same values: the GEMM dequantizes each slice to
# exactly the twin's weights; one row of x, on AVX2, applies each scale once per group instead,
# which is fp32 accumulation noise, as is a prefill's sgemm blocking panels otherwise than
# the twin's whole matrix: 1.1e-5 seen), at TP=1, TP=2 (intermediate 301: an uneven split
# whose row-parallel shard starts inside a scale block), PP=2 and DP=2.
source "$(dirname "$0")/../e2e/lib.sh"
shape=(--hidden-size 256 --intermediate-size 301 --layers 3 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 500
  --seed 3)
for scheme in fp8-block fp8-channel; do
  make_quantized_twin "$scheme" "${shape[@]}"
  # fp8 linear layers (a quarter) beside the float32 embedding, norms and scales.
  twin_matches_at_each_layout "$scheme" F8_E4M3 0.36 2e-5
done
echo PASS
