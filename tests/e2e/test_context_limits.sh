#!/usr/bin/env bash
# Context limits. A generated model with a 32-token context:
#  - input.truncate: error (the default): prompts that do not fit are error rows naming both lengths;
#  - input.truncate: left: they keep their last tokens (generate: room for max_new_tokens), the
#    count dropped in /truncated_tokens, one warning per job; score rows keep the completion whole;
#  - a row whose prompt + max_new_tokens passes the context, or the KV cache, ends with
#    finish_reason length exactly at that limit, with one warning per job (not per row, not per
#    replica: DP=2 prints one).
source "$(dirname "$0")/lib.sh"
"$TPBATCH" make-model "$WORK/m32" --preset tiny --layers 2 --max-position-embeddings 32 --seed 3 >/dev/null
"$TPBATCH" make-model "$WORK/m512" --preset tiny --layers 2 --seed 3 >/dev/null
$PY - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
rows = [("long40", 40), ("short10", 10), ("fits31", 31), ("full32", 32)]
with open(f"{w}/gen.jsonl", "w") as f:
    for rid, n in rows:
        f.write(json.dumps({"id": rid, "ids": [1] + [3 + (7 * i) % 500 for i in range(n - 1)]}) + "\n")
with open(f"{w}/score.jsonl", "w") as f:
    f.write(json.dumps({"id": "ppl40", "ids": [1] + [3 + (5 * i) % 500 for i in range(39)]}) + "\n")
    f.write(json.dumps({"id": "cont", "ids": [1] + [3 + i for i in range(35)], "completion_tokens": [9, 8, 7]}) + "\n")
    f.write(json.dumps({"id": "toolong", "ids": [1, 2], "completion_tokens": list(range(3, 40))}) + "\n")
with open(f"{w}/kv.jsonl", "w") as f:
    for rid in ("a", "b"):
        f.write(json.dumps({"id": rid, "ids": [1] + [5 + i for i in range(9)]}) + "\n")
PY
job() {  # job FILE MODEL INPUT TASK [extra YAML lines]
  local file=$1 model=$2 input=$3 task=$4
  shift 4
  write_job "$file" "$model" "$input" "${file%.yaml}.h5" "task: $task" "sampling:" "  max_new_tokens: 8" \
    "  ignore_eos: true" "$@"
  sed -i "s|^  path: $input|  path: $input\n  tokens_field: ids|" "$file"
}
job "$WORK/err.yaml" "$WORK/m32" "$WORK/gen.jsonl" generate
job "$WORK/left.yaml" "$WORK/m32" "$WORK/gen.jsonl" generate
sed -i "s|^  tokens_field: ids|  tokens_field: ids\n  truncate: left|" "$WORK/left.yaml"
job "$WORK/score.yaml" "$WORK/m32" "$WORK/score.jsonl" score
sed -i "s|^  tokens_field: ids|  tokens_field: ids\n  truncate: left|" "$WORK/score.yaml"
job "$WORK/kv.yaml" "$WORK/m512" "$WORK/kv.jsonl" generate "engine:" "  kv_cache_tokens: 48" "  block_size: 16"
sed -i "s|^  max_new_tokens: 8|  max_new_tokens: 100|" "$WORK/kv.yaml"
for j in err left score kv; do
  "$TPBATCH" "$WORK/$j.yaml" 2>"$WORK/$j.log" || { cat "$WORK/$j.log"; fail "$j run failed"; }
done
$PY - "$WORK" <<'PY'
import h5py, json, sys
w = sys.argv[1]
def rows(name):
    f = h5py.File(f"{w}/{name}.h5", "r")
    s = lambda k, i: f[k][i].decode() if isinstance(f[k][i], bytes) else f[k][i]
    return f, s
def warnings(name, what):
    return [l for l in open(f"{w}/{name}.log") if "warning" in l and what in l]
ids = [json.loads(l)["ids"] for l in open(f"{w}/gen.jsonl")]

f, s = rows("err")
assert "truncated_tokens" not in f, "error mode has no /truncated_tokens"
assert s("finish_reason", 0) == "error" and "prompt has 40 tokens; the model's context is 32" in s("error", 0), s("error", 0)
assert s("finish_reason", 3) == "error" and "prompt has 32 tokens" in s("error", 3)
assert s("finish_reason", 1) == "length" and len(f["output_tokens"][1]) == 8
assert s("finish_reason", 2) == "length" and len(f["output_tokens"][2]) == 1  # 31 + 1 = the context
ctx = warnings("err", "exceeds the model's context")
assert len(ctx) == 1 and "of 32 tokens" in ctx[0], ctx

f, s = rows("left")
assert list(f["truncated_tokens"][()]) == [16, 0, 0, 8], list(f["truncated_tokens"][()])
for i, keep in ((0, 24), (3, 24)):  # room for max_new_tokens: 32 - 8 tokens kept
    assert list(f["prompt_tokens"][i]) == ids[i][-keep:], i
    assert s("finish_reason", i) == "length" and len(f["output_tokens"][i]) == 8, i
assert list(f["prompt_tokens"][1]) == ids[1] and len(f["output_tokens"][2]) == 1
tr = warnings("left", "input.truncate: left")
assert len(tr) == 1 and "first 16 tokens are dropped" in tr[0], tr

f, s = rows("score")
assert list(f["truncated_tokens"][()]) == [8, 7, 0], list(f["truncated_tokens"][()])
assert s("finish_reason", 0) == "scored" and len(f["prompt_tokens"][0]) == 32 and len(f["output_tokens"][0]) == 31
assert s("finish_reason", 1) == "scored" and list(f["output_tokens"][1]) == [9, 8, 7] and len(f["prompt_tokens"][1]) == 29
assert s("finish_reason", 2) == "error" and "the model's context is 32" in s("error", 2), s("error", 2)

f, s = rows("kv")
for i in range(2):  # 10-token prompts, max_new_tokens 100, a 48-token KV cache: 38 new tokens each
    assert s("finish_reason", i) == "length" and len(f["output_tokens"][i]) == 38, (i, len(f["output_tokens"][i]))
kv = warnings("kv", "KV cache")
assert len(kv) == 1 and "of 48 tokens" in kv[0], kv
print("context limits: error, left, score and KV-cache bounds checked")
PY
# Once per job, not once per replica: at DP=2 each replica truncates a row, one warning is printed.
mpirun_tpbatch 2 "$WORK/left.yaml" --set output.path="$WORK/left2.h5" --set engine.max_seqs=1 \
  --set engine.lookahead=1 2>"$WORK/left2.log" || { cat "$WORK/left2.log"; fail "DP=2 run failed"; }
n=$(grep -c "warning: .*input.truncate: left" "$WORK/left2.log" || true)
[ "$n" = 1 ] || { cat "$WORK/left2.log"; fail "DP=2: $n truncation warnings, want 1 per job"; }
echo "PASS: context limits"
