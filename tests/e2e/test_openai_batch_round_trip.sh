#!/usr/bin/env bash
# OpenAI Batch API files in and out: request lines ({"custom_id", "method", "url", "body"}) for
# /v1/completions and /v1/chat/completions run exactly as the equivalent plain rows (body fields
# mapped: prompt, messages, max_tokens / max_completion_tokens, temperature, top_p, seed, stop),
# and `tpbatch export --format openai` writes one Batch API output line per row, in input order,
# whose every field is checked against the results file; errors are 400 responses with the reason.
# `--format jsonl` round-trips every dataset.
source "$(dirname "$0")/lib.sh"
need_stories
printf '%s' "{{ bos_token }}{% for m in messages %}{{ m['content'] | trim }}{% if not loop.last %} {% endif %}{% endfor %}" >"$WORK/t.jinja"
cat >"$WORK/openai.jsonl" <<'JSONL'
{"custom_id": "c-greedy", "method": "POST", "url": "/v1/completions", "body": {"model": "stories", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0}}
{"custom_id": "c-sampled", "method": "POST", "url": "/v1/completions", "body": {"model": "stories", "prompt": ["Lily and Ben"], "max_tokens": 12, "temperature": 0.9, "top_p": 0.8, "seed": 7}}
{"custom_id": "c-stop", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Once upon a time", "max_tokens": 40, "stop": ["."], "n": 1, "stream": false}}
{"custom_id": "chat-1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "stories-chat", "messages": [{"role": "user", "content": "Once upon a time"}], "max_completion_tokens": 8}}
{"custom_id": "bad-key", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "best_of": 2}}
{"custom_id": "bad-url", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}
JSONL
cat >"$WORK/plain.jsonl" <<'JSONL'
{"id": "c-greedy", "prompt": "Once upon a time", "max_new_tokens": 10, "temperature": 0}
{"id": "c-sampled", "prompt": "Lily and Ben", "max_new_tokens": 12, "temperature": 0.9, "top_p": 0.8, "seed": 7}
{"id": "c-stop", "prompt": "Once upon a time", "max_new_tokens": 40, "stop": ["."]}
{"id": "chat-1", "messages": [{"role": "user", "content": "Once upon a time"}], "max_new_tokens": 8}
{"id": "bad-key", "prompt": "x", "best_of": 2}
{"id": "bad-url", "prompt": "x", "max_new_tokens": 0}
JSONL
for k in openai plain; do
  write_job "$WORK/$k.yaml" "$STORIES" "$WORK/$k.jsonl" "$WORK/$k.h5" "chat_template: $WORK/t.jinja"
  mpirun_tpbatch 2 "$WORK/$k.yaml"
done
"$TPBATCH" export "$WORK/openai.h5" --format openai >"$WORK/out.jsonl"
"$TPBATCH" export "$WORK/openai.h5" --format jsonl --output "$WORK/rows.jsonl"
$PY - "$WORK" <<'PY'
import json, sys, h5py
w = sys.argv[1]
req = [json.loads(l) for l in open(f"{w}/openai.jsonl")]
out = [json.loads(l) for l in open(f"{w}/out.jsonl")]
rows = [json.loads(l) for l in open(f"{w}/rows.jsonl")]
with h5py.File(f"{w}/openai.h5", "r") as f, h5py.File(f"{w}/plain.h5", "r") as p:
    n = f["id"].shape[0]
    job_id = f.attrs["job_id"]
    job_id = job_id.decode() if isinstance(job_id, bytes) else str(job_id)
    assert len(out) == n == len(req) == len(rows), (len(out), n)
    get = lambda h, k, i: h[k][i].decode() if isinstance(h[k][i], bytes) else h[k][i]
    for i in range(n):
        o, r, cid = out[i], req[i], req[i]["custom_id"]
        assert o["custom_id"] == cid == get(f, "id", i), (i, o["custom_id"], cid)
        assert o["id"] == f"batch_req_{job_id}-{i}", (o["id"], job_id)
        fin, text = get(f, "finish_reason", i), get(f, "output_text", i)
        if fin != "error":  # the request ran as the equivalent plain row: same tokens, text and end
            for k in ("output_text", "finish_reason"):
                assert get(f, k, i) == get(p, k, i), (cid, k, get(f, k, i), get(p, k, i))
            assert list(f["output_tokens"][i]) == list(p["output_tokens"][i]), cid
            assert list(f["prompt_tokens"][i]) == list(p["prompt_tokens"][i]), cid
        if fin == "error":
            resp = o["response"]
            assert resp["status_code"] == 400 and o["error"] is None, o
            assert resp["body"]["error"]["message"] == get(f, "error", i), o
            assert resp["body"]["error"]["type"] == "invalid_request_error"
            continue
        resp = o["response"]
        assert o["error"] is None and resp["status_code"] == 200 and resp["request_id"] == f"req_{job_id}-{i}", o
        body = resp["body"]
        chat = r["url"] == "/v1/chat/completions"
        assert body["object"] == ("chat.completion" if chat else "text_completion"), body
        assert body["model"] == r["body"].get("model", "stories260K"), body
        (choice,) = body["choices"]
        assert choice["index"] == 0 and choice["logprobs"] is None
        assert (choice["message"] == {"role": "assistant", "content": text}) if chat else (choice["text"] == text), choice
        assert choice["finish_reason"] == {"eos": "stop", "stop": "stop", "length": "length"}[fin], (choice, fin)
        u = body["usage"]
        assert u["prompt_tokens"] == len(f["prompt_tokens"][i]) and u["completion_tokens"] == len(f["output_tokens"][i])
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
        mt = r["body"].get("max_tokens", r["body"].get("max_completion_tokens"))
        if fin == "length":
            assert u["completion_tokens"] == mt, (cid, u, mt)
    by = {o["custom_id"]: o for o in out}
    assert by["c-stop"]["response"]["body"]["choices"][0]["finish_reason"] == "stop"
    assert "unknown key 'body.best_of'" in by["bad-key"]["response"]["body"]["error"]["message"]
    assert "url '/v1/embeddings' asks for an embedding, but this job's task is generate" in \
        by["bad-url"]["response"]["body"]["error"]["message"]
    # jsonl: every dataset of every row.
    for i, j in enumerate(rows):
        assert j["id"] == get(f, "id", i) and j["done"] == bool(f["done"][i])
        for k in ("finish_reason", "error", "output_text"):
            assert j[k] == get(f, k, i), (i, k)
        for k in ("prompt_tokens", "output_tokens"):
            assert j[k] == [int(x) for x in f[k][i]], (i, k)
        assert j["output_logprobs"] == [float(x) for x in f["output_logprobs"][i]], i
        assert j["logprob_sum"] == float(f["logprob_sum"][i]) and j["is_greedy"] == bool(f["is_greedy"][i])
print("round trip: %d rows checked" % n)
PY
echo "PASS: OpenAI batch input and export round trip"
