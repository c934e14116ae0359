#!/usr/bin/env bash
# Constrained vs free generation throughput: ROWS rows under one JSON Schema, then the same rows
# without it, on MODEL (default: the committed stories260K), greedy, NEW new tokens each. Prints
# each run's output tok/s (from tpbatch's closing line) and the ratio constrained / free.
#   benchmarks/guided_throughput.sh [MODEL] [ROWS] [NEW]   (TPBATCH: the binary, default build/tpbatch)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TPBATCH=${TPBATCH:-$ROOT/build/tpbatch}
MODEL=${1:-$ROOT/models/stories260K}
ROWS=${2:-256}
NEW=${3:-128}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SCHEMA='{"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":4},"story":{"type":"string","maxLength":200}}}'
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
echo "rows $ROWS, new tokens <= $NEW: free $free output tok/s, constrained $constrained output tok/s"
awk -v c="$constrained" -v f="$free" 'BEGIN { printf "constrained / free = %.3f (goal >= 0.95)\n", c / f }'
