#!/usr/bin/env bash
# Sampled vs greedy decoding on the CPU backend (not a test). First the host's token choice alone
# (tpbatch_sampler_bench: 64 rows x 128,256 logits), then decode steps of a generated Llama with a
# 128,256-token vocabulary (hidden 128, 2 layers, so the LM head and the token choice weigh as much
# as they can), 64 rows, temperature 0 vs 0.8 (and top_p 0.9 / top_k 50): the engine's steps in
# one process, greedy and sampled in turn (tpbatch_sampled_decode_bench, the steadiest figure on
# a shared machine); whole tpbatch runs (64 rows x 32 new tokens, /metrics' tpot_p50_seconds),
# greedy and sampled alternating, the ratio the median of the paired ratios ("best": the ratio of
# the two fastest); and the same runs at one thread by CPU time (40 new tokens less 8).
# Usage: scripts/bench_sampling.sh [BUILD_DIR] [REPEATS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEATS=${2:-5}
TPBATCH="$BUILD/tpbatch"
cmake --build "$BUILD" --target tpbatch tpbatch_sampler_bench tpbatch_sampled_decode_bench >/dev/null
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpbatch-bench-sampling.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== the token choice alone"
"$BUILD/benchmarks/tpbatch_sampler_bench" "$REPEATS"

echo
echo "== decode steps, a generated 128k-vocabulary model"
"$TPBATCH" make-model "$WORK/model" --preset tiny --vocab-size 128256 --hidden-size 128 --layers 2 --heads 4 \
  --kv-heads 4 --intermediate-size 256 >/dev/null
echo "-- in one process, greedy and sampled steps in turn (tpbatch_sampled_decode_bench)"
"$BUILD/benchmarks/tpbatch_sampled_decode_bench" "$WORK/model" 64 $((REPEATS * 8))
echo
echo "-- whole runs: tpbatch's tpot"
/usr/bin/python3 - "$WORK/rows.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(64):
        f.write(json.dumps({"id": f"r{i}", "prompt": f"Once upon a time there was a little {i}"}) + "\n")
PY
cat >"$WORK/job.yaml" <<EOF
model: $WORK/model
input:
  path: $WORK/rows.jsonl
task: generate
sampling:
  max_new_tokens: 32
  seed: 3
  ignore_eos: true
output:
  path: $WORK/out.h5
  if_exists: overwrite
engine:
  max_seqs: 64
EOF
/usr/bin/python3 - "$REPEATS" "$WORK" "$TPBATCH" <<'PY'
import resource, statistics, subprocess, sys
repeats, work, tpbatch = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def cpu_seconds(*sets):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([tpbatch, f"{work}/job.yaml"] + [a for s in sets for a in ("--set", s)], check=True,
                   capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
def step_cpu_ms(*sets):
    # One thread; the CPU time of 40 new tokens less that of 8: 32 decode steps, without the start.
    one = ("engine.threads=1",) + sets
    return (cpu_seconds(*one, "sampling.max_new_tokens=40") - cpu_seconds(*one, "sampling.max_new_tokens=8")) / 32 * 1e3
def tpot(*sets):
    args = [tpbatch, f"{work}/job.yaml"] + [a for s in sets for a in ("--set", s)]
    subprocess.run(args, check=True, capture_output=True)
    import h5py
    with h5py.File(f"{work}/out.h5") as f:
        return f["metrics"].attrs["tpot_p50_seconds"] * 1e3
cases = [("temperature 0.8", ["sampling.temperature=0.8"]),
         ("temperature 0.8, top_p 0.9, top_k 50", ["sampling.temperature=0.8", "sampling.top_p=0.9", "sampling.top_k=50"])]
print(f"{'sampled':38} | {'step ms':>8} | {'greedy ms':>9} | {'ratio':>6} | {'best':>6} | paired ratios")
print(f"{'':38} | {'median':>8} | {'median':>9} | {'median':>6} | {'ratio':>6} |")
for name, sets in cases:
    s, g = [], []
    for _ in range(repeats):
        g.append(tpot("sampling.temperature=0"))
        s.append(tpot(*sets))
    ratios = [a / b for a, b in zip(s, g)]
    print(f"{name:38} | {statistics.median(s):8.2f} | {statistics.median(g):9.2f} | {statistics.median(ratios):5.2f}x"
          f" | {min(s) / min(g):5.2f}x | {', '.join(f'{r:.2f}' for r in ratios)}")
print()
print("CPU time of a decode step at 1 thread (less sensitive to other processes than the wall clock)")
print(f"{'sampled':38} | {'step ms':>8} | {'greedy ms':>9} | ratio (median of {repeats} pairs)")
for name, sets in cases:
    s, g = [], []
    for _ in range(repeats):
        g.append(step_cpu_ms("sampling.temperature=0"))
        s.append(step_cpu_ms(*sets))
    ratios = [a / b for a, b in zip(s, g)]
    print(f"{name:38} | {statistics.median(s):8.2f} | {statistics.median(g):9.2f} | {statistics.median(ratios):5.2f}x"
          f"  ({', '.join(f'{r:.2f}' for r in ratios)})")
PY
