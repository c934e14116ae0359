#!/usr/bin/env bash
# The default CPU threads per rank (engine.threads: 0) count the CPUs the rank may run on, not the
# machine's (topology/cpu_share.h): under `taskset -c 0` a rank says 1 thread in its start-up line;
# alone and unrestricted it says the CPUs it may use (nproc, which honours the affinity mask); two
# ranks sharing those CPUs (mpirun --bind-to none) split them; engine.threads still overrides.
source "$(dirname "$0")/lib.sh"
need_stories
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }

write_job "$WORK/job.yaml" "$STORIES" "$HERE/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 4"
# threads_said LOG: the N of rank 0's "[tpbatch] CPU threads per rank: N on rank 0 (...)".
threads_said() { sed -n 's/^.*\[tpbatch\] CPU threads per rank: \([0-9]*\) on rank 0 .*/\1/p' "$1"; }
# run_as NAME CMD...: runs CMD, its log in $WORK/NAME.log.
run_as() {
  local name=$1
  shift
  timeout 120 "$@" 2>"$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name run exited"; }
  grep "CPU threads per rank" "$WORK/$name.log" || fail "$name: no start-up line with the CPU threads"
}

run_as pinned taskset -c 0 "$TPBATCH" "$WORK/job.yaml"
[ "$(threads_said "$WORK/pinned.log")" = 1 ] || fail "under taskset -c 0: $(threads_said "$WORK/pinned.log") threads, expected 1"

run_as pinned_override taskset -c 0 "$TPBATCH" "$WORK/job.yaml" --set engine.threads=3
grep -q "CPU threads per rank: 3 on rank 0 (engine.threads)" "$WORK/pinned_override.log" ||
  fail "engine.threads=3 did not override the default"

cpus=$(nproc)
if [ "$cpus" -lt 2 ]; then
  echo "SKIP (in part): nproc is $cpus; the unrestricted halves need >= 2 CPUs"
  echo PASS
  exit 0
fi
run_as alone "$TPBATCH" "$WORK/job.yaml"
[ "$(threads_said "$WORK/alone.log")" = "$cpus" ] ||
  fail "one rank on $cpus CPUs: $(threads_said "$WORK/alone.log") threads, expected $cpus"

run_as two_ranks mpirun -np 2 --oversubscribe --bind-to none "$TPBATCH" "$WORK/job.yaml"
[ "$(threads_said "$WORK/two_ranks.log")" = "$((cpus / 2))" ] ||
  fail "two ranks sharing $cpus CPUs: $(threads_said "$WORK/two_ranks.log") threads each, expected $((cpus / 2))"
echo PASS
