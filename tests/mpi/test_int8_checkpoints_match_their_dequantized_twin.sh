#!/usr/bin/env bash
# int8 W8A8 checkpoints (compressed-tensors int-quantized, per-channel scales, dynamic per-token
# int8 activations) on the CPU: the model runs with its weights kept as int8 and every linear
# layer's input quantized to int8 per row, against its dequantized float32 twin at TP=1, TP=2
# (intermediate 301: an uneven split), PP=2 and DP=2. Not the same arithmetic (the twin keeps x
# in fp32), so: each GEMM output is off by at most max|x| / 254 * sum|w| of its row (the
# activation rounding, tests/unit/test_int8_gemm.cpp checks the bound); through this model that
# moves logprobs by up to TOL below (measured max 0.0?? on 9 rows x 24 tokens; TOL leaves ~2x);
# greedy tokens are identical except where the twin's own two best candidates lie within NEAR_TIE
# of each other (judged by the independent reference on the twin), after which the row is not
# compared.
source "$(dirname "$0")/../e2e/lib.sh"
[ -x "$REFERENCE" ] || fail "$REFERENCE is missing (build the tests/reference target)"
shape=(--hidden-size 256 --intermediate-size 301 --layers 3 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 500
  --seed 3)
TOL=0.05
NEAR_TIE=0.1
make_quantized_twin int8 "${shape[@]}"
# int8 linear layers (a quarter, plus a scale a row) beside the float32 embedding and norms.
twin_matches_at_each_layout int8 I8 0.36 "$TOL" --near-tie "$NEAR_TIE" --reference "$REFERENCE" \
  --model "$WORK/int8-twin"
echo PASS
