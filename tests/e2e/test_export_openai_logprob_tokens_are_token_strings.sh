#!/usr/bin/env bash
# export --format openai names logprob tokens by their text (decoded with the model's tokenizer, the
# model folder the results file names), with their UTF-8 bytes: a row's chosen tokens spell its
# output text. Without the model folder the tokens are token_id:N, said once on standard error.
source "$(dirname "$0")/lib.sh"
cp -r "$STORIES" "$WORK/model"
printf '%s\n' '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "Once upon a time", "max_tokens": 6, "logprobs": 2}}' \
  '{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "The little dog"}], "max_tokens": 6, "logprobs": true, "top_logprobs": 2}}' \
  >"$WORK/in.jsonl"
echo '{% for m in messages %}{{ m.content }}{% endfor %}' >"$WORK/template.jinja"
write_job "$WORK/job.yaml" "$WORK/model" "$WORK/in.jsonl" "$WORK/r.h5" "chat_template: $WORK/template.jinja"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the run failed"
"$TPBATCH" export "$WORK/r.h5" --format openai -o "$WORK/out.jsonl" 2>"$WORK/log" || fail "export failed: $(cat "$WORK/log")"
grep -q "token_id" "$WORK/log" "$WORK/out.jsonl" && fail "token ids with the model folder there: $(cat "$WORK/log")"
$PY - "$WORK/out.jsonl" <<'PY'
import json, sys
a, b = (json.loads(l) for l in open(sys.argv[1]))
ca = a["response"]["body"]["choices"][0]
toks = ca["logprobs"]["tokens"]
assert "".join(toks) == ca["text"], (toks, ca["text"])
assert all(len(alts) == 2 for alts in ca["logprobs"]["top_logprobs"]), ca["logprobs"]["top_logprobs"]
cb = b["response"]["body"]["choices"][0]
content = cb["logprobs"]["content"]
assert "".join(c["token"] for c in content) == cb["message"]["content"], (content, cb["message"]["content"])
assert all(bytes(c["bytes"]).decode() == c["token"] for c in content), content
print("completion tokens:", toks, "| chat tokens:", [c["token"] for c in content])
PY
rm -r "$WORK/model"
"$TPBATCH" export "$WORK/r.h5" --format openai -o "$WORK/ids.jsonl" 2>"$WORK/log" || fail "export without the model failed"
[ "$(grep -c "logprob tokens are written as token_id:N" "$WORK/log")" = 1 ] || fail "not said once: $(cat "$WORK/log")"
grep -q '"token":"token_id:[0-9]*","logprob":[^,]*,"bytes":null' "$WORK/ids.jsonl" || fail "no token_id:N tokens: $(head -c 400 "$WORK/ids.jsonl")"
echo "without the model: $(cut -c1-200 "$WORK/log")"
