#!/usr/bin/env bash
# For each test tokenizer (tests/data/README.md: Llama-2 SentencePiece, GPT-2, Llama-3 and Qwen2
# pre-tokenizers), a model whose tokenizer.json is that one writes /prompt_tokens equal to Hugging Face's ids for every
# case (encoded with special tokens, as the engine does: BOS where the post-processor adds one).
source "$(dirname "$0")/lib.sh"
TOK=$TEST_TOKENIZERS
[ -f "$TOK/llama-spm/tokenizer.json" ] || fail "no tokenizer suites in '$TOK' (TPBATCH_TEST_TOKENIZERS_DIR: the build unpacks them)"
for name in llama-spm gpt-2 gpt2-vocab-llama3-pretok gpt2-vocab-qwen2-pretok; do
  case $name in
    llama-spm) vocab=32000 bos=1 ;;
    gpt-2 | gpt2-vocab-qwen2-pretok) vocab=50257 bos= ;;
    gpt2-vocab-llama3-pretok) vocab=50257 bos=50256 ;;
  esac
  "$TPBATCH" make-model "$WORK/$name" --preset tiny --layers 1 --vocab-size "$vocab" --max-position-embeddings 4096 >/dev/null
  cp "$TOK/$name/tokenizer.json" "$TOK/$name/tokenizer_config.json" "$WORK/$name/"
  $PY - "$TOK/$name/cases.jsonl" "$WORK/$name.jsonl" "$WORK/$name.want" "$bos" <<'PY'
import json, sys
cases, rows, want, bos = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
with open(cases) as f, open(rows, "w") as r, open(want, "w") as w:
    for line in f:
        c = json.loads(line)
        if c["add_special_tokens"]:
            continue
        ids = ([int(bos)] if bos else []) + c["ids"]
        r.write(json.dumps({"prompt": c["text"]}) + "\n")
        w.write(json.dumps(ids) + "\n")
PY
  write_job "$WORK/$name.yaml" "$WORK/$name" "$WORK/$name.jsonl" "$WORK/$name.h5" "sampling:" "  max_new_tokens: 0"
  "$TPBATCH" "$WORK/$name.yaml" 2>/dev/null
  $PY - "$WORK/$name.h5" "$WORK/$name.want" "$name" <<'PY'
import h5py, json, sys
f = h5py.File(sys.argv[1])
want = [json.loads(l) for l in open(sys.argv[2])]
bad = 0
for i, w in enumerate(want):
    got = [int(x) for x in f["prompt_tokens"][i]]
    if got != w and not (w == [] and f["finish_reason"][i] == b"error"):
        bad += 1
        print(f"{sys.argv[3]} case {i}: got {got[:12]} want {w[:12]}")
print(f"{sys.argv[3]}: {len(want) - bad}/{len(want)} prompts tokenized as Hugging Face does")
sys.exit(1 if bad else 0)
PY
done
