#!/usr/bin/env bash
# Constrained vs free generation throughput: ROWS rows under one JSON Schema, then the same rows
# without it, on MODEL, greedy, NEW new tokens each. Prints each run's output tok/s (from tpbatch's
# closing line), the ratio constrained / free, and the constrained run's mask time per step (its
# "guided:" line: time spent masking constrained rows' logits and advancing their matchers), and
# checks every constrained row its schema ended: it must parse as JSON and match the schema.
#   benchmarks/guided_throughput.sh [MODEL] [ROWS] [NEW]   (TPBATCH: the binary, default build/tpbatch)
# TPBATCH_DEVICE=cuda|cpu|auto sets the jobs' device (default: the job default, auto); PYTHON the
# interpreter of the check (default python3).
# MODEL: a model folder (default: the committed stories260K), or "125m": a generated 124.7M model
# (make-model --preset 125m, float32) given Llama-2's real tokenizer (32,000 tokens, from
# tests/data/tokenizers.tar.xz), so the masks are computed over a real vocabulary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TPBATCH=${TPBATCH:-$ROOT/build/tpbatch}
MODEL=${1:-$ROOT/models/stories260K}
ROWS=${2:-256}
NEW=${3:-128}
DEVICE=${TPBATCH_DEVICE:-}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ "$MODEL" = 125m ]; then
  MODEL="$WORK/m125"
  "$TPBATCH" make-model "$MODEL" --preset 125m --dtype float32 >/dev/null
  tar xJf "$ROOT/tests/data/tokenizers.tar.xz" -C "$WORK" tokenizers/llama-spm
  cp "$WORK"/tokenizers/llama-spm/tokenizer.json "$WORK"/tokenizers/llama-spm/tokenizer_config.json "$MODEL/"
fi
SCHEMA='{"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":4},"story":{"type":"string","maxLength":200}},"required":["name","age","tags","story"]}'
for i in $(seq 1 "$ROWS"); do echo "{\"id\": \"r$i\", \"prompt\": \"Once upon a time number $i\"}"; done >"$WORK/in.jsonl"
run() {  # run NAME [extra YAML lines]: prints output tok/s
  local name=$1
  shift
  { echo "model: $MODEL"; echo "input: {path: $WORK/in.jsonl}"; echo "output: {path: $WORK/$name.h5}"
    echo "sampling: {max_new_tokens: $NEW, temperature: 0.0, ignore_eos: false}"
    [ -n "$DEVICE" ] && echo "device: $DEVICE"
    for l in "$@"; do echo "$l"; done; } >"$WORK/$name.yaml"
  "$TPBATCH" "$WORK/$name.yaml" 2>"$WORK/$name.log" || { cat "$WORK/$name.log" >&2; exit 1; }
  sed -n 's/.*; \([0-9.]*\) output tok\/s.*/\1/p' "$WORK/$name.log" | tail -1
}
free=$(run free)
constrained=$(run constrained "guided: {json: $SCHEMA}")
echo "model $MODEL, rows $ROWS, new tokens <= $NEW, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "free $free output tok/s, constrained $constrained output tok/s"
grep -o 'guided: .*' "$WORK/constrained.log" || echo "no guided: line in the constrained run's log" >&2
# The rows the schema ended (finish_reason eos; the others hit max_new_tokens mid-object).
"$TPBATCH" export "$WORK/constrained.h5" -o "$WORK/constrained.jsonl"
$PYTHON - "$WORK/constrained.jsonl" <<'PY'
import json, sys
ended = valid = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["finish_reason"] != "eos":
        continue
    ended += 1
    try:
        v = json.loads(r["output_text"])
    except ValueError:
        continue
    ok = (isinstance(v, dict) and set(v) == {"name", "age", "tags", "story"}
          and isinstance(v["name"], str) and len(v["name"]) <= 40
          and isinstance(v["age"], int) and not isinstance(v["age"], bool) and v["age"] >= 0
          and isinstance(v["tags"], list) and len(v["tags"]) <= 4
          and all(isinstance(t, str) and len(t) <= 20 for t in v["tags"])
          and isinstance(v["story"], str) and len(v["story"]) <= 200)
    valid += ok
print(f"schema-valid: {valid} of the {ended} rows the schema ended")
sys.exit(0 if valid == ended else 1)
PY
awk -v c="$constrained" -v f="$free" 'BEGIN { printf "constrained / free = %.3f (goal >= 0.95)\n", c / f }'
