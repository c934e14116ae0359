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
echo "== generated text (/output_text in out/quickstart.h5; prompts in jobs/quickstart.jsonl) =="
h5dump -d /output_text out/quickstart.h5 | sed -n '/DATA {/,/^   }/p' | sed '1d;$d'
echo
build/tpbatch inspect out/quickstart.h5
