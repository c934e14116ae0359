#!/usr/bin/env bash
# `tpbatch plan --json` agrees with the run: for float32, bfloat16 and float16 jobs on the
# CPU backend, at TP=1 and TP=2 (mpirun -np 2), plan's weights_bytes_per_rank and
# kv_bytes_per_token_per_rank are within 1% of the run's start-up lines
#   weights: X MiB per rank ...        KV cache: N tokens per rank (B bytes per token per rank, DTYPE)
# Jobs: a bf16 checkpoint with dtype auto (kept 16-bit), float32 (widened) and float16 (converted),
# an fp16 checkpoint with dtype auto, a bfloat16 KV cache, fp8 checkpoints (block and per-channel
# scales; intermediate 688 splits at TP=2 inside a 128-column scale block), int8 (W8A8, per-channel
# scales), and 4-bit ones (awq,
# w4a16; intermediate 640 splits at TP=2 inside a 128-column group).
source "$(dirname "$0")/lib.sh"

"$TPBATCH" make-model "$WORK/bf16" --hidden-size 256 --intermediate-size 688 --layers 4 --heads 8 --kv-heads 4 \
  --head-dim 32 --dtype bfloat16 --seed 3 >/dev/null
"$TPBATCH" make-model "$WORK/fp16" --hidden-size 256 --intermediate-size 688 --layers 4 --heads 8 --kv-heads 4 \
  --head-dim 32 --dtype float16 --seed 3 >/dev/null
for q in fp8-block fp8-channel int8; do
  "$TPBATCH" make-model "$WORK/$q" --hidden-size 256 --intermediate-size 688 --layers 4 --heads 8 --kv-heads 4 \
    --head-dim 32 --dtype bfloat16 --quantize "$q" --seed 3 >/dev/null
done
for q in awq w4a16; do
  "$TPBATCH" make-model "$WORK/$q" --hidden-size 256 --intermediate-size 640 --layers 4 --heads 8 --kv-heads 4 \
    --head-dim 32 --dtype bfloat16 --quantize "$q" --seed 3 >/dev/null
done
echo '{"id": "a", "prompt": "Once upon a time"}' >"$WORK/prompts.jsonl"

# check NAME MODEL TP SETS...: run the job and plan it; compare.
check() {
  local name=$1 model=$2 tp=$3
  shift 3
  local sets=(--set parallel.tensor="$tp")
  for s in "$@"; do sets+=(--set "$s"); done
  write_job "$WORK/$name.yaml" "$model" "$WORK/prompts.jsonl" "$WORK/$name.h5" "sampling:" "  max_new_tokens: 4"
  if [ "$tp" -eq 1 ]; then
    "$TPBATCH" "$WORK/$name.yaml" "${sets[@]}" 2>"$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: run exited"; }
  else
    mpirun_tpbatch "$tp" "$WORK/$name.yaml" "${sets[@]}" 2>"$WORK/$name.log" ||
      { cat "$WORK/$name.log"; fail "$name: run exited"; }
  fi
  "$TPBATCH" plan "$WORK/$name.yaml" "${sets[@]}" --json >"$WORK/$name.plan.json" || fail "$name: plan exited $?"
  "$PY" - "$name" "$tp" "$WORK/$name.log" "$WORK/$name.plan.json" <<'PYEOF'
import json, re, sys
name, tp, log, plan = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read(), json.load(open(sys.argv[4]))
w = re.search(r"weights: ([0-9.]+) MiB per rank \(min [0-9.]+; backend [^,]+, (\w+) weights[),]", log)
kv = re.search(r"KV cache: (\d+) tokens per rank \((\d+) bytes per token per rank, (\w+)\)", log)
if not w or not kv:
    sys.exit(f"FAIL {name}: start-up lines not found in the log:\n{log}")
run_w, run_kv = float(w.group(1)) * 2**20, int(kv.group(2))
lay = [l for l in plan["layouts"] if l["tensor"] == tp and l["pipeline"] == 1]
if len(lay) != 1:
    sys.exit(f"FAIL {name}: plan has no TP={tp} layout")
pw, pkv = lay[0]["weights_bytes_per_rank"], lay[0]["kv_bytes_per_token_per_rank"]
dw, dkv = abs(pw - run_w) / run_w, abs(pkv - run_kv) / run_kv
print(f"{name}: TP={tp} weights run {run_w / 2**20:.2f} MiB ({w.group(2)}) plan {pw / 2**20:.4f} MiB ({plan['weight_dtype']}, "
      f"{100 * dw:.3f}%); KV/token run {run_kv} ({kv.group(3)}) plan {pkv} ({plan['kv_cache_dtype']}, {100 * dkv:.3f}%)")
if plan["device"] != "cpu":
    sys.exit(f"FAIL {name}: plan chose device {plan['device']} for a CPU job")
names = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
if names.get(w.group(2)) != plan["weight_dtype"] or names.get(kv.group(3)) != plan["kv_cache_dtype"]:
    sys.exit(f"FAIL {name}: dtypes differ between the run and the plan")
if dw > 0.01 or dkv > 0.01:
    sys.exit(f"FAIL {name}: plan and run differ by more than 1%")
PYEOF
}

for tp in 1 2; do
  check "bf16_auto_tp$tp" "$WORK/bf16" "$tp" device=cpu
  check "bf16_as_fp32_tp$tp" "$WORK/bf16" "$tp" device=cpu dtype=float32
  check "bf16_as_fp16_tp$tp" "$WORK/bf16" "$tp" device=cpu dtype=float16
  check "fp16_auto_tp$tp" "$WORK/fp16" "$tp" device=cpu
  check "bf16_kv_bf16_tp$tp" "$WORK/bf16" "$tp" device=cpu engine.kv_cache_dtype=bfloat16
  check "fp8_block_tp$tp" "$WORK/fp8-block" "$tp" device=cpu
  check "fp8_channel_tp$tp" "$WORK/fp8-channel" "$tp" device=cpu
  check "int8_tp$tp" "$WORK/int8" "$tp" device=cpu
  check "awq_tp$tp" "$WORK/awq" "$tp" device=cpu
  check "w4a16_tp$tp" "$WORK/w4a16" "$tp" device=cpu
done
echo PASS
