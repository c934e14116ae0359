#!/usr/bin/env bash
# The OpenAI request bodies users send beyond a plain string: chat content-part lists (text parts
# joined with "\n", as vLLM does; an image_url part is an error row naming its type) and
# /v1/completions prompts given as a list of one string or as token ids (used as they are: no BOS
# added). Several prompts in one request line are an error row that says to split them. Checked on
# the prompt token ids; the export to an OpenAI output file takes every row.
source "$(dirname "$0")/lib.sh"
need_stories
printf '%s' "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}" >"$WORK/t.jinja"
chat='"method": "POST", "url": "/v1/chat/completions"'
completion='"method": "POST", "url": "/v1/completions"'
cat >"$WORK/in.jsonl" <<JSONL
{"custom_id": "joined_by_hand", $completion, "body": {"prompt": "Once upon a time\nthere was"}}
{"custom_id": "parts", $chat, "body": {"messages": [{"role": "user", "content": [{"type": "text", "text": "Once upon a time"}, {"type": "text", "text": "there was"}]}]}}
{"custom_id": "image", $chat, "body": {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}}
{"custom_id": "string", $completion, "body": {"prompt": "Once upon a time"}}
{"custom_id": "list_of_one", $completion, "body": {"prompt": ["Once upon a time"]}}
{"custom_id": "ids", $completion, "body": {"prompt": [403, 407, 261]}}
{"custom_id": "list_of_ids", $completion, "body": {"prompt": [[1, 403, 407]]}}
{"custom_id": "two", $completion, "body": {"prompt": ["Once", "Lily"]}}
JSONL
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "chat_template: $WORK/t.jinja" \
  "sampling:" "  max_new_tokens: 2"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "the run failed: $(tail -3 "$WORK/log")"
$PY - "$WORK/out.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    ids = [x.decode() for x in f["id"][:]]
    row = {k: ([int(x) for x in f["prompt_tokens"][i]], f["error"][i].decode()) for i, k in enumerate(ids)}
assert row["parts"] == row["joined_by_hand"] and not row["parts"][1], (row["parts"], row["joined_by_hand"])
assert row["list_of_one"] == row["string"] and not row["string"][1], (row["list_of_one"], row["string"])
assert row["ids"][0] == [403, 407, 261], row["ids"]
assert row["list_of_ids"][0] == [1, 403, 407], row["list_of_ids"]
assert "'messages[0].content[1]' is a content part of type 'image_url'" in row["image"][1], row["image"]
assert "'body.prompt' holds 2 prompts" in row["two"][1], row["two"]
print("parts:", row["parts"][0], " ids:", row["ids"][0], " image:", row["image"][1])
PY
"$TPBATCH" export "$WORK/out.h5" --format openai >"$WORK/out.jsonl" 2>"$WORK/log" ||
  fail "export --format openai failed: $(tail -3 "$WORK/log")"
[ "$(wc -l <"$WORK/out.jsonl")" = 8 ] || fail "export wrote $(wc -l <"$WORK/out.jsonl") lines, want 8"
echo "PASS: content-part lists, token-id and list prompts read as vLLM reads them; the rest refused by name"
