#!/usr/bin/env bash
# The parallel layouts with `device: cuda` on the emulated device (NCCL stand-in between the
# ranks): TP=2, PP=2, DP=2 and TP=2 x PP=2 on stories260K agree with the CPU backend at TP=1
# within what bf16 implies; the NCCL all-reduces are the Megatron schedule's two per layer.
source "$(dirname "$0")/lib_emu.sh"

write_job "$WORK/gen.yaml" "$STORIES" "$PROMPTS" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 16" "  ignore_eos: true" "engine:" "  max_seqs: 4"
on cpu 1 "$WORK/gen.yaml" --set output.path="$WORK/cpu.h5" --set sampling.top_logprobs=5
for layout in "2 1" "1 2" "1 1" "2 2"; do
  read -r t p <<<"$layout"
  np=$((t * p))
  ((np == 1)) && np=2  # data parallel: two replicas
  name="TP=$t PP=$p on $np ranks"
  on cuda "$np" "$WORK/gen.yaml" --set output.path="$WORK/cuda-$t-$p.h5" --set parallel.tensor="$t" \
    --set parallel.pipeline="$p"
  if ((t == 2)); then
    # stories260K has 5 layers: each TP group makes 2 all-reduces a layer of its stage a step.
    grep -q "allreduce" "$WORK/log" || fail "$name: no all-reduce counter in the log"
  fi
  agree "$WORK/cuda-$t-$p.h5" "$WORK/cpu.h5" "$name"
done
echo PASS
