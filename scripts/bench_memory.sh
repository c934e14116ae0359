#!/usr/bin/env bash
# Bounded memory: peak resident memory of a job against its number of rows (10k, 100k, 1M short
# rows on a tiny model, one new token each). Flat = the input is streamed and results are flushed.
# Usage: scripts/bench_memory.sh [BUILD_DIR] [MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODEL=${2:-models/stories260K}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf "%10s %12s %10s %10s\n" rows "peak RSS MiB" seconds "rows/s"
for n in 10000 100000 1000000; do
  /usr/bin/python3 -c "
import sys
with open('$WORK/in.jsonl', 'w') as f:
    for i in range($n):
        f.write('{\"id\": \"r%d\", \"prompt\": \"Once upon a time %d\"}\n' % (i, i % 1000))"
  cat >"$WORK/job.yaml" <<JOB
model: $(realpath "$MODEL")
input:
  path: $WORK/in.jsonl
sampling:
  max_new_tokens: 1
output:
  path: $WORK/out.h5
  if_exists: overwrite
engine:
  max_seqs: 256
  progress_interval: 60
JOB
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$WORK/rss" "$BUILD/tpbatch" "$WORK/job.yaml" 2>/dev/null
  end=$(date +%s.%N)
  secs=$(echo "$end - $start" | bc)
  printf "%10d %12.1f %10.1f %10.0f\n" "$n" "$(echo "$(cat "$WORK/rss") / 1024" | bc -l)" "$secs" "$(echo "$n / $secs" | bc -l)"
done
