#!/usr/bin/env bash
# chat_template_kwargs are variables of the chat template, as apply_chat_template(**kwargs) and
# vLLM's request key pass them (Qwen3's enable_thinking): the job key's values reach every
# messages row, a row's own object (plain row or OpenAI chat body) replaces them name by name, and
# kwargs that are not an object are an error row naming the key. Checked on the prompt token ids
# against the same prompts written out by hand.
source "$(dirname "$0")/lib.sh"
need_stories
printf '%s' "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{% if enable_thinking is defined and enable_thinking is false %} there was{% endif %}{% if name is defined %} {{ name }}{% endif %}" >"$WORK/t.jinja"
cat >"$WORK/in.jsonl" <<'JSONL'
{"id": "off", "prompt": "Once upon a time there was"}
{"id": "on", "prompt": "Once upon a time"}
{"id": "off_named", "prompt": "Once upon a time there was Lily"}
{"id": "job", "messages": [{"role": "user", "content": "Once upon a time"}]}
{"id": "row", "messages": [{"role": "user", "content": "Once upon a time"}], "chat_template_kwargs": {"enable_thinking": true}}
{"custom_id": "body", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Once upon a time"}], "chat_template_kwargs": {"enable_thinking": true}}}
{"id": "named", "messages": [{"role": "user", "content": "Once upon a time"}], "chat_template_kwargs": {"name": "Lily"}}
{"id": "bad", "messages": [{"role": "user", "content": "Once upon a time"}], "chat_template_kwargs": [true]}
JSONL
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "chat_template: $WORK/t.jinja" \
  "chat_template_kwargs:" "  enable_thinking: false" "sampling:" "  max_new_tokens: 0"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "the run failed: $(tail -3 "$WORK/log")"
"$TPBATCH" "$WORK/job.yaml" --set 'chat_template_kwargs=~' --set output.path="$WORK/none.h5" 2>"$WORK/log" ||
  fail "the run without job kwargs failed: $(tail -3 "$WORK/log")"
$PY - "$WORK" <<'PY'
import sys, h5py
def rows(path):
    with h5py.File(path, "r") as f:
        ids = [x.decode() for x in f["id"][:]]
        return {k: ([int(x) for x in f["prompt_tokens"][i]], f["error"][i].decode()) for i, k in enumerate(ids)}
got, none = rows(f"{sys.argv[1]}/out.h5"), rows(f"{sys.argv[1]}/none.h5")
def same(row, plain, table=got):
    assert table[row][0] == table[plain][0], f"{row}: {table[row][0]} != {plain} {table[plain][0]}"
same("job", "off")          # the job's enable_thinking: false
same("row", "on")           # the row's true replaces it
same("body", "on")          # so does an OpenAI chat body's
same("named", "off_named")  # a row's other names add to the job's
same("job", "on", none)     # without the job key: not defined
err = got["bad"][1]
assert "'chat_template_kwargs' must be an object of template variables" in err and "got a list" in err, err
print("job kwargs:", got["job"][0], " row override:", got["row"][0], " bad:", err)
PY
echo "PASS: chat_template_kwargs reach the template, a row's over the job's"
