#!/usr/bin/env bash
# Rows with "messages" are rendered with the chat template (the job key chat_template here:
# stories260K's tokenizer_config.json has none) and add_generation_prompt on, and encoded without
# added special tokens, as transformers and vLLM encode a rendered chat: a template that writes
# bos_token gets exactly the tokens (and greedy text) of the same prompt written out by hand, BOS
# included; one that does not gets no BOS at all. A template that raises, a model without a
# template, and an unknown row key give error rows naming the reason.
source "$(dirname "$0")/lib.sh"
need_stories
printf '%s' "{{ bos_token }}{% for m in messages %}{{ m['content'] | trim }}{% if not loop.last %} {% endif %}{% endfor %}{% if add_generation_prompt %}, there was{% endif %}" >"$WORK/with_bos.jinja"
printf '%s' "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system messages') }}{% endif %}{{ m.content | trim }}{% if not loop.last %} {% endif %}{% endfor %}{% if add_generation_prompt %}, there was{% endif %}" >"$WORK/no_bos.jinja"
cat >"$WORK/in.jsonl" <<'JSONL'
{"id": "plain", "prompt": "Once upon a time, there was"}
{"id": "chat", "messages": [{"role": "user", "content": " Once upon"}, {"role": "user", "content": "a time"}]}
{"id": "raises", "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]}
{"id": "unknown_key", "messages": [{"role": "user", "content": "y"}], "best_of": 2}
JSONL
for t in with_bos no_bos; do
  write_job "$WORK/$t.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/$t.h5" "chat_template: $WORK/$t.jinja" \
    "sampling:" "  max_new_tokens: 12"
  "$TPBATCH" "$WORK/$t.yaml"
done
$PY - "$WORK" <<'PY'
import sys, h5py
work = sys.argv[1]
for t in ("with_bos", "no_bos"):
    with h5py.File(f"{work}/{t}.h5", "r") as f:
        ids = [x.decode() for x in f["id"][:]]
        row = {k: i for i, k in enumerate(ids)}
        plain, chat = row["plain"], row["chat"]
        pt = [list(map(int, f["prompt_tokens"][i])) for i in (plain, chat)]
        out = [f["output_text"][i].decode() for i in (plain, chat)]
        if t == "with_bos":
            assert pt[0] == pt[1], f"{t}: chat prompt tokens {pt[1]} != plain {pt[0]}"
            assert pt[1][0] == 1 and pt[1][1] != 1, f"{t}: BOS not exactly once: {pt[1]}"
            assert out[0] == out[1] and out[0], f"{t}: outputs differ: {out}"
        else:
            assert pt[1] == pt[0][1:], f"{t}: chat prompt tokens {pt[1]} != plain without its BOS {pt[0][1:]}"
        err = {k: f["error"][row[k]].decode() for k in ("raises", "unknown_key")}
        if t == "no_bos":
            assert "the chat template refused the messages: no system messages" in err["raises"], err
        assert "unknown key 'best_of'" in err["unknown_key"], err
        print(t, "prompt tokens", pt[1], "text", repr(out[1]))
PY
# Without chat_template, stories260K has no template: an error row that says so.
write_job "$WORK/none.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/none.h5" "sampling:" "  max_new_tokens: 2"
"$TPBATCH" "$WORK/none.yaml"
$PY - "$WORK/none.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    e = f["error"][1].decode()
    assert "has no chat_template" in e and "chat_template" in e, e
    assert f["finish_reason"][0].decode() == "length"
print("no template:", e)
PY
echo "PASS: messages rows rendered with the chat template, BOS only where the template writes it"
