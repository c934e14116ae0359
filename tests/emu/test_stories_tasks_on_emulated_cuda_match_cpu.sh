#!/usr/bin/env bash
# stories260K with `device: cuda` on the emulated device against `device: cpu`, one rank: greedy
# generation (fp32 weights on TF32 GEMMs, bf16 weights, a float32 KV cache), top logprobs, the
# score and embed tasks agree within what bf16 activations imply; prefix caching on and off, and
# a seeded sampled run repeated, compute alike on the device; sampled rows drawn on the device
# equal the same rows drawn on the host; top_k 1 sampling is greedy.
source "$(dirname "$0")/lib_emu.sh"

write_job "$WORK/gen.yaml" "$STORIES" "$PROMPTS" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 24" "  ignore_eos: true"
on cpu 1 "$WORK/gen.yaml" --set output.path="$WORK/cpu.h5" --set sampling.top_logprobs=5
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/cuda.h5"
grep -q "EMULATED" "$WORK/log" || fail "the start-up log does not say the device is emulated"
agree "$WORK/cuda.h5" "$WORK/cpu.h5" "generate, fp32 weights (TF32), bf16 KV cache"

on cpu 1 "$WORK/gen.yaml" --set output.path="$WORK/cpu-bf16.h5" --set sampling.top_logprobs=5 --set dtype=bfloat16
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/cuda-bf16.h5" --set dtype=bfloat16
agree "$WORK/cuda-bf16.h5" "$WORK/cpu-bf16.h5" "generate, bf16 weights"

on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/cuda-f32kv.h5" --set engine.kv_cache_dtype=float32 \
  --set sampling.top_logprobs=3
agree "$WORK/cuda-f32kv.h5" "$WORK/cpu.h5" "generate, float32 KV cache, top logprobs on the device"
$PY - "$WORK/cuda-f32kv.h5" <<'PY' || fail "top logprobs on the device"
import h5py, sys, numpy as np
f = h5py.File(sys.argv[1], "r")
for i in range(f["done"].shape[0]):
    toks, top, lp = list(f["output_tokens"][i]), list(f["top_logprob_tokens"][i]), np.asarray(f["top_logprobs"][i])
    assert len(top) == 3 * len(toks), (i, len(top), len(toks))
    for p, t in enumerate(toks):  # greedy: the chosen token is the best alternative, with its logprob
        assert top[3 * p] == t and abs(lp[3 * p] - f["output_logprobs"][i][p]) < 1e-5, (i, p)
        assert lp[3 * p] >= lp[3 * p + 1] >= lp[3 * p + 2], (i, p)
print("top logprobs: best first, the greedy token first")
PY

on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/cuda-prefix.h5" --set engine.prefix_caching=true
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/cuda-noprefix.h5" --set engine.prefix_caching=false
agree "$WORK/cuda-prefix.h5" "$WORK/cpu.h5" "prefix caching on"
agree "$WORK/cuda-noprefix.h5" "$WORK/cpu.h5" "prefix caching off"

sampled=(--set sampling.temperature=0.8 --set sampling.top_p=0.9 --set sampling.seed=7)
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/s1.h5" "${sampled[@]}"
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/s2.h5" "${sampled[@]}"
identical "$WORK/s1.h5" "$WORK/s2.h5" "a seeded sampled run, repeated on the device"
# Those rows are drawn on the device (only their tokens come back); asking for top logprobs
# brings the same rows' logits to the host, whose sampler draws them: the same tokens, logprobs.
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/s-host.h5" "${sampled[@]}" --set sampling.top_logprobs=1
identical "$WORK/s1.h5" "$WORK/s-host.h5" "a seeded sampled run drawn on the device and on the host"
$PY - "$WORK/s1.h5" "$WORK/cuda.h5" <<'PY' || fail "the sampled run is the greedy one: nothing was drawn"
import h5py, sys, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
assert any(not np.array_equal(a["output_tokens"][i], b["output_tokens"][i]) for i in range(a["done"].shape[0]))
print("the sampled run differs from the greedy one")
PY
on cuda 1 "$WORK/gen.yaml" --set output.path="$WORK/topk1.h5" --set sampling.temperature=0.8 --set sampling.top_k=1
identical "$WORK/topk1.h5" "$WORK/cuda.h5" "top_k 1 sampling is the greedy run"

write_job "$WORK/score.yaml" "$STORIES" "$HERE/prompts_score.jsonl" "$WORK/out.h5" "task: score"
on cpu 1 "$WORK/score.yaml" --set output.path="$WORK/score-cpu.h5"
on cuda 1 "$WORK/score.yaml" --set output.path="$WORK/score-cuda.h5"
agree "$WORK/score-cuda.h5" "$WORK/score-cpu.h5" "score"

for pooling in last mean; do
  write_job "$WORK/embed.yaml" "$STORIES" "$PROMPTS" "$WORK/out.h5" "task: embed" "embed:" "  pooling: $pooling"
  on cpu 1 "$WORK/embed.yaml" --set output.path="$WORK/embed-cpu.h5"
  on cuda 1 "$WORK/embed.yaml" --set output.path="$WORK/embed-cuda.h5"
  agree "$WORK/embed-cuda.h5" "$WORK/embed-cpu.h5" "embed, $pooling pooling"
done
echo PASS
