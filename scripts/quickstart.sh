#!/usr/bin/env bash
# Fresh Debian 12, as root: install, build, generate a tiny model, run a job on 2 ranks, inspect it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=OFF >/dev/null
cmake --build build -j "$(nproc)" --target tpbatch
build/tpbatch make-model models/tiny --preset tiny
mkdir -p out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe build/tpbatch jobs/quickstart.yaml
build/tpbatch inspect out/quickstart.h5
