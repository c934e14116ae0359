#!/usr/bin/env bash
# 4-bit checkpoints on the CPU, in the three formats make-model writes (awq gemm, gptq, and
# compressed-tensors W4A16 pack-quantized; group size 128): an independent numpy reading of each
# file (int4_unpack_reference.py, from the formats' own dequantize code) gives the dequantized
# twin's float32 weights exactly; then each runs with its weights kept as 4-bit values, scales
# and zero points and gives the same greedy tokens as its twin, logprobs within 2e-5 (fp32
# arithmetic on the same values: the GEMM dequantizes each slice to exactly the twin's weights;
# one row of x, on AVX2, applies each scale and zero point once per group instead, which is fp32
# accumulation noise, as is a prefill's sgemm blocking panels otherwise than the twin's
# whole matrix: 1.1e-5 seen), at TP=1, TP=2
# (intermediate 640 = 5 groups: the row-parallel down_proj shard starts inside group 2), PP=2
# and DP=2.
source "$(dirname "$0")/../e2e/lib.sh"
shape=(--hidden-size 256 --intermediate-size 640 --layers 3 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 500
  --seed 5)
for scheme in awq gptq w4a16; do
  make_quantized_twin "$scheme" "${shape[@]}"
  $PY "$HERE/../mpi/int4_unpack_reference.py" "$scheme" "$WORK/$scheme" "$WORK/$scheme-twin" ||
    fail "$scheme: make-model's file disagrees with the format's reference dequantization"
  # 4-bit linear layers (0.5 + 8/128 bytes a weight against 4) beside the float32 embedding and norms.
  twin_matches_at_each_layout "$scheme" I4 0.30 2e-5
done
echo PASS
