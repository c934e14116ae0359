#!/usr/bin/env bash
# Constrained vs free generation throughput: ROWS rows under one JSON Schema, then the same rows
# without it, on MODEL, greedy, NEW new tokens each. Prints each run's output tok/s (from tpbatch's
# closing line), the ratio constrained / free, and the constrained run's mask time per step (its
# "guided:" line: time spent masking constrained rows' logits and advancing their matchers).
#   benchmarks/guided_throughput.sh [MODEL] [ROWS] [NEW]   (TPBATCH: the binary, default build/tpbatch)
# MODEL: a model folder (default: the committed stories260K), or "125m": a generated 124.7M model
# (make-model --preset 125m, float32) given Llama-2's real tokenizer (32,000 tokens, from
# tests/data/tokenizers.tar.xz), so the masks are computed over a real vocabulary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TPBATCH=${TPBATCH:-$ROOT/build/tpbatch}
MODEL=${1:-$ROOT/models/stories260K}
ROWS=${2:-256}
NEW=${3:-128}
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
    echo "sampling: {max_new_tokens: $NEW, temperature: 0.0, ignore_eos: false}"; for l in "$@"; do echo "$l"; done; } >"$WORK/$name.yaml"
  "$TPBATCH" "$WORK/$name.yaml" 2>"$WORK/$name.log" || { cat "$WORK/$name.log" >&2; exit 1; }
  sed -n 's/.*; \([0-9.]*\) output tok\/s.*/\1/p' "$WORK/$name.log" | tail -1
}
free=$(run free)
constrained=$(run constrained "guided: {json: $SCHEMA}")
echo "model $MODEL, rows $ROWS, new tokens <= $NEW, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "free $free output tok/s, constrained $constrained output tok/s"
grep -o 'guided: .*' "$WORK/constrained.log" || echo "no guided: line in the constrained run's log" >&2
awk -v c="$constrained" -v f="$free" 'BEGIN { printf "constrained / free = %.3f (goal >= 0.95)\n", c / f }'
