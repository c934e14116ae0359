#!/usr/bin/env bash
# `tpbatch plan`'s predicted speed (plan/cost_model.h) against measured runs of the generated 125M
# model: TP=1, TP=2, DP=2 and TP=2 x PP=2 (mpirun -np 1/2/2/4), 32 rows x (128 prompt + 64 new tokens).
# The machine is calibrated once (`mpirun -np 2 tpbatch plan --calibrate`: read bandwidth, fp32 GEMM,
# MPI allreduce alpha/beta) and those values are passed to the plan of each world size as flags.
# Measured: the run's "[tpbatch] done:" line (TPOT p50 = decode step, output tok/s, TTFT p50).
# Usage: scripts/bench_plan_vs_run.sh [BUILD_DIR]     (aim: predicted/measured within 25%)
set -euo pipefail
BUILD=${1:-build}
TP=$(cd "$BUILD" && pwd)/tpbatch
[ -x "$TP" ] || { echo "no tpbatch in $BUILD" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
WORK=$(mktemp -d -t tpbatch-plan-vs-run-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ROWS=32 PROMPT=128 NEW=64
MPIRUN=(mpirun --oversubscribe --bind-to none)

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
"$TP" make-model "$WORK/m125" --preset 125m >/dev/null
python3 - "$WORK/rows.jsonl" "$ROWS" "$PROMPT" <<'PY'
import json, random, sys
rnd = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": f"r{i}", "ids": [rnd.randrange(3, 32000) for _ in range(int(sys.argv[3]))]}) + "\n")
PY
cat >"$WORK/job.yaml" <<YAML
model: $WORK/m125
input:
  path: $WORK/rows.jsonl
  tokens_field: ids
output:
  path: $WORK/out.h5
  if_exists: overwrite
  logprobs: false
sampling:
  ignore_eos: true
  max_new_tokens: $NEW
engine:
  max_seqs: $ROWS
YAML

cd "$WORK"
"${MPIRUN[@]}" -np 2 "$TP" plan job.yaml --calibrate --world-size 2 --json >calibration.json
read -r MEM GEMM HALF ALPHA BETA < <(python3 -c '
import json; m = json.load(open("calibration.json"))["machine"]
print(m["memory_gbs"], m["gemm_tflops"], m["gemm_half_rows"], m["alpha_us"], m["allreduce_gbs"])')
echo "calibrated: read $MEM GB/s, GEMM $GEMM TFLOP/s (m_half $HALF rows), allreduce alpha $ALPHA us, B $BETA GB/s"
MACHINE=(--memory-gbs "$MEM" --gemm-tflops "$GEMM" --gemm-half-rows "$HALF" --alpha-us "$ALPHA" --allreduce-gbs "$BETA")

: >results.txt
for spec in "TP=1 1 1 1" "TP=2 2 2 1" "DP=2 2 1 1" "TP=2xPP=2 4 2 2"; do
  read -r name np t p <<<"$spec"
  dp=$((np / (t * p)))
  "$TP" plan job.yaml --world-size "$np" --json --prompt-tokens "$PROMPT" --new-tokens "$NEW" \
    --rows $((ROWS / dp)) "${MACHINE[@]}" >"plan$np.json"
  sets=(--set "parallel.tensor=$t" --set "parallel.pipeline=$p")
  if [ "$np" -eq 1 ]; then cmd=("$TP" job.yaml "${sets[@]}"); else cmd=("${MPIRUN[@]}" -np "$np" "$TP" job.yaml "${sets[@]}"); fi
  "${cmd[@]}" >"run$np-$t-$p.log" 2>&1 || { echo "$name: run failed:"; tail -5 "run$np-$t-$p.log"; exit 1; }
  done_line=$(grep -a '\[tpbatch\] done:' "run$np-$t-$p.log" | tail -1)
  echo "$name $np $t $p $done_line" >>results.txt
  echo "$name: $done_line"
done

python3 - <<'PY'
import json, re
print("\n| layout | ranks | predicted step ms | measured TPOT p50 ms | ratio | predicted out tok/s | measured out tok/s | ratio | predicted TTFT s | measured TTFT p50 s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
worst = 0.0
for line in open("results.txt"):
    name, np_, t, p, rest = line.split(None, 4)
    np_, t, p = int(np_), int(t), int(p)
    plan = json.load(open(f"plan{np_}.json"))
    lay = next(l for l in plan["layouts"] if l["tensor"] == t and l["pipeline"] == p)
    s = lay["speed"]
    out_tps = float(re.search(r"([\d.]+) output tok/s", rest).group(1))
    tpot = float(re.search(r"TPOT p50 ([\d.]+)s", rest).group(1))
    ttft = float(re.search(r"TTFT p50 ([\d.]+)s", rest).group(1))
    r_step = s["decode_step_us"] / 1e3 / (tpot * 1e3)
    r_tps = s["batch_output_tokens_per_s"] / out_tps
    worst = max(worst, abs(r_step - 1), abs(r_tps - 1))
    print(f"| {name} | {np_} | {s['decode_step_us']/1e3:.1f} | {tpot*1e3:.1f} | {r_step:.2f} | "
          f"{s['batch_output_tokens_per_s']:.1f} | {out_tps:.1f} | {r_tps:.2f} | {s['ttft_s']:.2f} | {ttft:.2f} |")
print(f"\nworst |ratio - 1| = {worst:.2f} (aim <= 0.25); predicted out tok/s = all rows x new / (TTFT + new x step)")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
