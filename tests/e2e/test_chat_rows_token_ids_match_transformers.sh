#!/usr/bin/env bash
# Chat rows are tokenized as transformers' apply_chat_template(tokenize=True) and vLLM tokenize a
# rendered chat: without added special tokens, so the only BOS is the one the template writes. On a
# Phi-3-mini tokenizer (tests/e2e/phi3_tokenizer.py: add_bos_token true, a template that writes no
# BOS) the rows start with <|user|> / <|system|>, not <s>; with Llama-2's template ({{ bos_token }}
# per turn) they have exactly the template's BOS. Every row form gets the same ids: a `messages`
# row, an OpenAI /v1/chat/completions body, and content-part lists (text parts joined with "\n").
# The expected ids were made with transformers 4.46.3 (tokenizers 0.20.3) from the same files.
source "$(dirname "$0")/lib.sh"
TOK=$TEST_TOKENIZERS
[ -f "$TOK/llama-spm/tokenizer.json" ] || fail "no tokenizer suites in '$TOK' (TPBATCH_TEST_TOKENIZERS_DIR: the build unpacks them)"
TEMPLATES="$HERE/../data/chat_templates"
"$TPBATCH" make-model "$WORK/phi3" --preset tiny --layers 1 --vocab-size 32064 --max-position-embeddings 512 >/dev/null
$PY "$HERE/phi3_tokenizer.py" "$TOK/llama-spm" "$TEMPLATES/phi-3-mini-instruct.jinja" "$WORK/phi3"
$PY - "$WORK/in.jsonl" <<'PY'
import json, sys
one_turn = [{"role": "user", "content": "Hello, who are you?"}]
turns = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"},
         {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}]
parts = [{"role": "user", "content": [{"type": "text", "text": "Line one"}, {"type": "text", "text": "line two"}]}]
def request(cid, messages):
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": {"messages": messages}}
with open(sys.argv[1], "w") as f:
    for row in ({"id": "one_turn", "messages": one_turn}, request("turns", turns), {"id": "parts", "messages": parts},
                request("parts_body", parts)):
        f.write(json.dumps(row) + "\n")
PY
for t in phi-3-mini phi-3.5-mini llama-2; do
  extra=()
  case $t in
    phi-3.5-mini) extra=("chat_template: $TEMPLATES/phi-3.5-mini-instruct.jinja") ;;
    llama-2) extra=("chat_template: $TEMPLATES/llama-2-chat.jinja") ;;
  esac
  write_job "$WORK/$t.yaml" "$WORK/phi3" "$WORK/in.jsonl" "$WORK/$t.h5" "${extra[@]}" "sampling:" "  max_new_tokens: 0"
  "$TPBATCH" "$WORK/$t.yaml" 2>"$WORK/$t.log" || fail "$t: the run failed: $(tail -3 "$WORK/$t.log")"
done
$PY - "$WORK" <<'PY'
import sys, h5py
PHI3 = {  # the same for Phi-3 and Phi-3.5: their templates differ only on an empty system message
    "one_turn": [32010, 29871, 13, 10994, 29892, 1058, 526, 366, 29973, 32007, 29871, 13, 32001, 29871, 13],
    "turns": [32006, 29871, 13, 3492, 526, 263, 8444, 20255, 29889, 32007, 29871, 13, 32010, 29871, 13, 5618, 338,
              29871, 29906, 29974, 29906, 29973, 32007, 29871, 13, 32001, 29871, 13, 29946, 32007, 29871, 13, 32010,
              29871, 13, 2855, 29871, 29941, 29974, 29941, 29973, 32007, 29871, 13, 32001, 29871, 13],
    "parts": [32010, 29871, 13, 3542, 697, 13, 1220, 1023, 32007, 29871, 13, 32001, 29871, 13],
}
LLAMA2 = {
    "one_turn": [1, 518, 25580, 29962, 15043, 29892, 1058, 526, 366, 29973, 518, 29914, 25580, 29962],
    "turns": [1, 518, 25580, 29962, 3532, 14816, 29903, 6778, 13, 3492, 526, 263, 8444, 20255, 29889, 13, 29966, 829,
              14816, 29903, 6778, 13, 13, 5618, 338, 29871, 29906, 29974, 29906, 29973, 518, 29914, 25580, 29962,
              29871, 29946, 29871, 32000, 1, 518, 25580, 29962, 1126, 29871, 29941, 29974, 29941, 29973, 518, 29914,
              25580, 29962],
    "parts": [1, 518, 25580, 29962, 7407, 697, 13, 1220, 1023, 518, 29914, 25580, 29962],
}
for t, want in (("phi-3-mini", PHI3), ("phi-3.5-mini", PHI3), ("llama-2", LLAMA2)):
    with h5py.File(f"{sys.argv[1]}/{t}.h5", "r") as f:
        ids = [x.decode() for x in f["id"][:]]
        for i, row in enumerate(ids):
            assert f["finish_reason"][i].decode() != "error", f"{t} {row}: {f['error'][i].decode()}"
            got = [int(x) for x in f["prompt_tokens"][i]]
            expected = want[row.replace("_body", "")]
            assert got == expected, f"{t} {row}: prompt tokens\n  {got}\nwant (transformers)\n  {expected}"
    print(f"{t}: {len(ids)} chat rows tokenized as transformers' apply_chat_template")
PY
echo "PASS: chat rows carry only the template's BOS, as transformers and vLLM tokenize them"
