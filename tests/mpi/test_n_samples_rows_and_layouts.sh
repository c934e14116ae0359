#!/usr/bin/env bash
# sampling.n > 1: a line with n samples has n consecutive results rows, /input_line
# and /sample say which; a row's "n" (an OpenAI request's body.n) overrides the job's; a bad n is an
# error row per sample. Sample 0 is the row a job without n computes; the samples of a line differ;
# every sample is the same at TP=1, TP=2 and DP=2; resume recomputes single missing samples
# identically; export --format openai gives one line per request with n choices.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
cat >"$WORK/in.jsonl" <<'JSONL'
{"id": "a", "prompt": "Once upon a time"}
{"id": "b", "prompt": "The cat", "n": 3}
{"id": "c", "prompt": "Lily went", "n": 1}
{"id": "d", "prompt": "One day", "n": 0}
{"custom_id": "e", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Tom had", "max_tokens": 20, "n": 2}}
JSONL
# The same prompts one sample each, without any n: what sample 0 must equal.
cat >"$WORK/one.jsonl" <<'JSONL'
{"id": "a", "prompt": "Once upon a time"}
{"id": "b", "prompt": "The cat"}
{"id": "c", "prompt": "Lily went"}
{"id": "d", "prompt": "One day"}
{"custom_id": "e", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Tom had", "max_tokens": 20}}
JSONL
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/a.h5" \
  "sampling:" "  n: 2" "  max_new_tokens: 20" "  temperature: 1.0" "  seed: 5" "  ignore_eos: true" "  top_logprobs: 2"
write_job "$WORK/one.yaml" "$STORIES" "$WORK/one.jsonl" "$WORK/one.h5" \
  "sampling:" "  max_new_tokens: 20" "  temperature: 1.0" "  seed: 5" "  ignore_eos: true" "  top_logprobs: 2"
mpirun_tpbatch 1 "$WORK/job.yaml" 2>"$WORK/a.log" || { cat "$WORK/a.log"; fail "n > 1 job failed"; }
mpirun_tpbatch 1 "$WORK/one.yaml" 2>/dev/null || fail "one-sample job failed"
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/tp2.h5" --set parallel.tensor=2 2>/dev/null ||
  fail "TP=2 run failed"
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/dp2.h5" --set engine.max_seqs=1 2>/dev/null ||
  fail "DP=2 run failed"
$PY - "$WORK" <<'PY' || fail "n > 1 rows wrong"
import sys, h5py
w = sys.argv[1]
f, one = h5py.File(f"{w}/a.h5", "r"), h5py.File(f"{w}/one.h5", "r")
toks = lambda g: [list(map(int, t)) for t in g["output_tokens"][:]]
assert f.attrs["num_rows"] == 10 and f["done"].shape == (10,), f.attrs["num_rows"]
assert list(f["input_line"][:]) == [0, 0, 1, 1, 1, 2, 3, 3, 4, 4], list(f["input_line"][:])
assert list(f["sample"][:]) == [0, 1, 0, 1, 2, 0, 0, 1, 0, 1], list(f["sample"][:])
assert [i.decode() for i in f["id"][:]] == list("aabbbcddee")
assert "input_line" not in one and "sample" not in one, "n = 1 everywhere: the contract's layout"
fin = [x.decode() for x in f["finish_reason"][:]]
for r in (6, 7):
    assert fin[r] == "error" and "'n' must be an integer in [1, 128]" in f["error"][r].decode(), (r, f["error"][r])
t, t1 = toks(f), toks(one)
first = {0: 0, 1: 2, 2: 5, 4: 8}
for line, row in first.items():  # sample 0 is the row without n
    assert t[row] == t1[line], (line, t[row], t1[line])
    assert list(f["top_logprob_tokens"][row]) == list(one["top_logprob_tokens"][line]), line
assert len(t[8]) == 20 and len(t[0]) == 20
for rows in ((0, 1), (2, 3, 4), (8, 9)):  # the samples of a line differ
    assert len({tuple(t[r]) for r in rows}) == len(rows), [t[r] for r in rows]
for other in ("tp2", "dp2"):
    g = h5py.File(f"{w}/{other}.h5", "r")
    assert toks(g) == t, f"{other} sampled differently"
    assert list(g["sample"][:]) == list(f["sample"][:]), other
print("rows, samples and layouts ok")
PY
# Resume: two single samples (line 1 sample 1, line 4 sample 1) marked not done are recomputed alone.
cp "$WORK/a.h5" "$WORK/r.h5"
$PY - "$WORK/r.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    for r in (3, 9):
        f["done"][r] = 0
        f["output_tokens"][r] = []
    f.attrs["complete"] = 0
PY
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/r.h5" --set output.if_exists=resume \
  --set engine.max_seqs=1 2>"$WORK/r.log" || { cat "$WORK/r.log"; fail "resume failed"; }
$PY - "$WORK" <<'PY' || fail "resumed samples differ"
import sys, h5py
w = sys.argv[1]
a, r = h5py.File(f"{w}/a.h5", "r"), h5py.File(f"{w}/r.h5", "r")
toks = lambda g: [list(map(int, t)) for t in g["output_tokens"][:]]
assert r.attrs["complete"] == 1 and toks(a) == toks(r), "resume changed or lost samples"
PY
# OpenAI export: one line per request, its samples as choices 0..n-1.
"$TPBATCH" export "$WORK/a.h5" --format openai >"$WORK/out.jsonl"
$PY - "$WORK" <<'PY' || fail "openai export of n > 1 wrong"
import json, sys, h5py
w = sys.argv[1]
f = h5py.File(f"{w}/a.h5", "r")
lines = [json.loads(l) for l in open(f"{w}/out.jsonl")]
assert len(lines) == 5, len(lines)
assert [l["custom_id"] for l in lines] == list("abcde"), [l["custom_id"] for l in lines]
counts = [len(l["response"]["body"]["choices"]) if l["response"]["status_code"] == 200 else 0 for l in lines]
assert counts == [2, 3, 1, 0, 2], counts
assert lines[3]["response"]["status_code"] == 400
b = lines[1]["response"]["body"]
assert [c["index"] for c in b["choices"]] == [0, 1, 2]
assert [c["text"] for c in b["choices"]] == [f["output_text"][r].decode() for r in (2, 3, 4)]
assert b["usage"]["completion_tokens"] == sum(len(f["output_tokens"][r]) for r in (2, 3, 4))
print("openai export ok")
PY
# A job-level n > 1 needs task: generate.
out=$("$TPBATCH" "$WORK/job.yaml" --set task=score 2>&1) && fail "score with sampling.n: 2 accepted"
echo "$out" | grep -q "'sampling.n' is 2, but several samples of a prompt need task: generate" || fail "message: $out"
echo "n > 1 samples ok"
