#!/usr/bin/env bash
# Fresh Debian 12, as root: install, build, run a job with the committed stories260K model on 2 ranks,
# print the stories it wrote and the summary of the results file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=OFF >/dev/null
cmake --build build -j "$(nproc)" --target tpbatch
mkdir -p out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe build/tpbatch jobs/quickstart.yaml
echo
echo "== each prompt (jobs/quickstart.jsonl) followed by its generated text (out/quickstart.h5) =="
build/tpbatch export out/quickstart.h5 --format jsonl | python3 -c '
import json, sys
prompts = {r["id"]: r["prompt"] for r in map(json.loads, open("jobs/quickstart.jsonl"))}
for r in map(json.loads, sys.stdin):
    print("[%s] %s%s\n" % (r["id"], prompts[r["id"]], r["output_text"]))'
echo
build/tpbatch inspect out/quickstart.h5
