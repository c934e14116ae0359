#!/usr/bin/env bash
# 16-bit checkpoints on the CPU: with the default dtype the weights stay 16-bit (the
# start-up line's "weights: X MiB per rank" is about half the `dtype: float32` run's) and are
# computed in fp32; greedy tokens equal the widened-to-fp32 run on the shared prompts and logprobs
# agree within 1e-3. The bf16 checkpoint's fp32 run matches the independent reference (1e-4). For bf16 and
# fp16 checkpoints of a generated model large enough (3M parameters) for the bytes to be decisive.
source "$(dirname "$0")/lib.sh"

weights_mib() { sed -n 's/.*weights: \([0-9.]*\) MiB per rank.*/\1/p' "$1" | head -1; }

for dt in bfloat16 float16; do
  model="$WORK/model_$dt"
  "$TPBATCH" make-model "$model" --hidden-size 256 --intermediate-size 688 --layers 4 --heads 8 --kv-heads 4 \
    --head-dim 32 --dtype "$dt" --seed 11 >/dev/null
  write_job "$WORK/job_$dt.yaml" "$model" "$HERE/prompts_mixed.jsonl" "$WORK/w16_$dt.h5" \
    "sampling:" "  max_new_tokens: 32" "  ignore_eos: true"
  "$TPBATCH" "$WORK/job_$dt.yaml" 2>"$WORK/w16_$dt.log" || { cat "$WORK/w16_$dt.log"; fail "$dt run exited $?"; }
  "$TPBATCH" "$WORK/job_$dt.yaml" --set dtype=float32 --set output.path="$WORK/w32_$dt.h5" 2>"$WORK/w32_$dt.log" ||
    { cat "$WORK/w32_$dt.log"; fail "$dt run with dtype float32 exited $?"; }
  grep -h "weights:" "$WORK/w16_$dt.log" "$WORK/w32_$dt.log"
  want=$([ "$dt" = bfloat16 ] && echo BF16 || echo F16)
  grep -q "$want weights" "$WORK/w16_$dt.log" || fail "$dt checkpoint: weights not kept as $want"
  grep -q "F32 weights" "$WORK/w32_$dt.log" || fail "dtype: float32 did not widen the $dt weights"
  w16=$(weights_mib "$WORK/w16_$dt.log")
  w32=$(weights_mib "$WORK/w32_$dt.log")
  # Half, plus the float32 norms (under 0.1% of this model).
  "$PY" -c "import sys; r = $w16 / $w32; print('$dt weights ratio %.4f' % r); sys.exit(0 if 0.495 < r < 0.505 else 1)" ||
    fail "$dt weights $w16 MiB vs float32 $w32 MiB: not half"
  "$PY" "$HERE/compare_runs.py" "$WORK/w16_$dt.h5" "$WORK/w32_$dt.h5" --tol 1e-3 --expect-rows 9 ||
    fail "$dt weights vs the same weights widened to float32"
  if [ "$dt" = bfloat16 ] && [ -x "$REFERENCE" ]; then  # once: the reference is the slow part
    "$PY" "$HERE/check_against_reference.py" "$WORK/w32_$dt.h5" --reference "$REFERENCE" --model "$model" \
      --max-new-tokens 32 --expect-rows 9 || fail "$dt checkpoint widened to float32 vs the reference"
  fi
done
echo PASS
