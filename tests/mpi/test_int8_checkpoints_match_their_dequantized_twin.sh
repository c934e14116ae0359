#!/usr/bin/env bash
# int8 W8A8 checkpoints (compressed-tensors int-quantized, per-channel scales, dynamic per-token
# int8 activations) on the CPU: the model runs with its weights kept as int8 (under 0.36 of the
# float32 twin's bytes) and every linear layer's input quantized to int8 per row.
# 1. Against its dequantized float32 twin at TP=1, TP=2 (intermediate 301: an uneven split), PP=2
#    and DP=2. Not the same arithmetic: the twin keeps x in fp32, and each GEMM output of the int8
#    run is off by up to max|x| / 254 * sum|w| of its row (tests/unit/test_int8_gemm.cpp checks
#    that bound). This random 3-layer model amplifies that into logprob differences of up to 0.30
#    (measured: 0.285 at TP=1/PP=2/DP=2, 0.301 at TP=2, where each rank quantizes its own slice of
#    a row-parallel layer's input), so TWIN_TOL = 0.6; greedy tokens are identical up to the first
#    position where the twin's two candidates are within TWIN_TOL of each other (the independent
#    reference judges), and the row is compared up to there.
# 2. Against an independent W8A8 reading (w8a8_reference.py: the numpy reference on the twin with
#    each projection's input quantized per row in float64): logprobs within REF_TOL = 0.15, at
#    every layout. Not float noise either: x differs from the float64 reference's by ~1e-6, which
#    moves the odd element across a rounding boundary of the int8 grid, one grid step each
#    (measured 0.047). A row-parallel layer (o_proj, down_proj) quantizes each rank's slice of a
#    row with the whole row's scale (the ranks agree on it), so TP=2 quantizes as TP=1 does; with
#    each slice's own scale TP=2 misses this by up to 0.34.
# 3. Each layout against TP=1: the same REF_TOL, for the same reason (measured 0.043 at TP=2).
# 4. A Qwen2-MoE model (routed experts split over the ranks, a shared expert) at TP=1 and TP=2:
#    both against the W8A8 reference, each expert's and the shared expert's down projection
#    quantized with whole-row scales (without: 1.1 at TP=2).
source "$(dirname "$0")/../e2e/lib.sh"
[ -x "$REFERENCE" ] || fail "$REFERENCE is missing (build the tpbatch_reference target)"
shape=(--hidden-size 256 --intermediate-size 301 --layers 3 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 500
  --seed 3)
TWIN_TOL=0.6
REF_TOL=0.15
make_quantized_twin int8 "${shape[@]}"
twin_matches_at_each_layout int8 I8 0.36 "$TWIN_TOL" --near-tie "$TWIN_TOL" --reference "$REFERENCE" \
  --model "$WORK/int8-twin"
# Every layout's results against the independent reference, and against TP=1's.
layouts=("$WORK"/int8-np*.h5)
$PY "$HERE/../mpi/w8a8_reference.py" "$WORK/int8-twin" "${layouts[@]}" --tol "$REF_TOL" --near-tie "$REF_TOL" ||
  fail "int8 vs the independent W8A8 reference"
for run in "${layouts[@]}"; do
  $PY "$HERE/compare_runs.py" "$WORK/int8-np1-tp1-pp1.h5" "$run" --tol "$REF_TOL" --near-tie "$REF_TOL" \
    --reference "$REFERENCE" --model "$WORK/int8-twin" --expect-rows 9 || fail "$(basename "$run") vs TP=1"
done

moe=(--architecture Qwen2MoeForCausalLM --hidden-size 128 --intermediate-size 160 --moe-intermediate-size 96
  --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --vocab-size 500 --experts 4 --seed 5)
"$TPBATCH" make-model "$WORK/moe" "${moe[@]}" --quantize int8 >/dev/null
"$TPBATCH" make-model "$WORK/moe-twin" "${moe[@]}" --quantize int8 --dequantize >/dev/null
write_job "$WORK/moe.yaml" "$WORK/moe" "$HERE/prompts_mixed.jsonl" "$WORK/moe-tp1.h5" \
  "sampling:" "  max_new_tokens: 24" "  ignore_eos: true"
"$TPBATCH" "$WORK/moe.yaml" 2>"$WORK/moe.log" || { cat "$WORK/moe.log"; fail "the int8 MoE model at TP=1 exited $?"; }
mpirun_tpbatch 2 "$WORK/moe.yaml" --set parallel.tensor=2 --set output.path="$WORK/moe-tp2.h5" 2>"$WORK/moe.log" ||
  { cat "$WORK/moe.log"; fail "the int8 MoE model at TP=2 exited $?"; }
$PY "$HERE/../mpi/w8a8_reference.py" "$WORK/moe-twin" "$WORK/moe-tp1.h5" "$WORK/moe-tp2.h5" --tol "$REF_TOL" \
  --near-tie "$REF_TOL" || fail "the int8 MoE model vs the independent W8A8 reference"
echo PASS
