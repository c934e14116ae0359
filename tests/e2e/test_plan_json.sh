#!/usr/bin/env bash
# `tpbatch plan --json` on Llama-3.1-70B's published config.json (config only, no weights, no MPI),
# bf16, 80 GB devices (74.5 GiB), 16 ranks: the acceptance numbers of the plan issue.
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/llama70b"
cat >"$WORK/llama70b/config.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 8192,
  "intermediate_size": 28672,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
}
JSON
# load_job requires the input file to exist (it is never read by plan).
echo '{"prompt": "hello"}' >"$WORK/prompts.jsonl"
write_job "$WORK/job.yaml" "$WORK/llama70b" "$WORK/prompts.jsonl" "$WORK/out.h5"

cd "$WORK"
"$TPBATCH" plan job.yaml --json --world-size 16 --device-memory 74.5 >plan.json || fail "plan exited $?"
[ ! -e out.h5 ] || fail "plan wrote a results file"

"$PY" - plan.json <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
L = {(l["tensor"], l["pipeline"]): l for l in j["layouts"]}
def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
check(j["world_size"] == 16, "world_size")
check(j["device_memory_bytes"] == int(74.5 * 2**30), "device_memory_bytes")
for l in j["layouts"]:
    for k in ("tensor", "pipeline", "data", "weights_bytes_per_rank", "kv_bytes_per_token_per_rank",
              "kv_tokens_per_rank", "fits"):
        check(k in l, "layout key " + k)
    check(l["tensor"] * l["pipeline"] * l["data"] == 16, "tensor x pipeline x data == 16")
total = 141.1e9
for t in (1, 2, 4, 8, 16):
    w = L[(t, 1)]["weights_bytes_per_rank"]
    check(abs(w - total / t) < 0.03 * total / t, "weights per rank at TP=%d: %d" % (t, w))
check(L[(4, 1)]["kv_bytes_per_token_per_rank"] == 80 * 1024, "KV/token at TP=4")
check(L[(8, 1)]["kv_bytes_per_token_per_rank"] == 40 * 1024, "KV/token at TP=8")
check(L[(16, 1)]["kv_bytes_per_token_per_rank"] == 40 * 1024, "KV/token at TP=16")
check(not L[(1, 1)]["fits"] and not L[(2, 1)]["fits"], "no fit at TP <= 2")
check(L[(4, 1)]["fits"] and L[(8, 1)]["fits"], "fit at TP=4 and TP=8")
rec = j["recommended"]
check(rec["throughput"]["tensor"] == 4 and rec["throughput"]["pipeline"] == 1 and rec["throughput"]["data"] == 4,
      "throughput recommendation %r" % rec["throughput"])
check(rec["latency"]["tensor"] == 16, "latency recommendation %r" % rec["latency"])
print("plan JSON ok: %d layouts" % len(j["layouts"]))
PYEOF

# Bad arguments: exit 2.
set +e
"$TPBATCH" plan job.yaml --world-size 0 2>/dev/null
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--world-size 0 exited $rc, expected 2"
echo PASS
