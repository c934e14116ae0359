#!/usr/bin/env bash
# A healthy job on an oversubscribed host (4 ranks, TP=2 x DP=2, on a 2-core
# machine) with a short watchdog must complete: waiting is not dying. Rank 0's main thread sleeps
# 2 x the watchdog time before handing out rows (TPBATCH_TEST_SLEEP_AT, as a long compute step would
# take), so replica 1's leader waits on rank 0 and its TP worker waits on its leader longer than the
# watchdog time; replica 1 also ends long before rank 0 and waits at the end. The heartbeats keep
# flowing from every rank's own thread, so nothing is taken for dead: exit 0, every row done.
# The same job under the per-call watchdog (TPBATCH_LIVENESS=per-call, the fallback without
# MPI_THREAD_MULTIPLE) aborts on the TP worker's wait: it shows what the heartbeats fix.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
WATCHDOG=3
N=4
write_prompts "$WORK/in.jsonl" "$N"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "parallel:" "  tensor: 2" "sampling:" "  max_new_tokens: 8" \
  "engine:" "  watchdog_seconds: $WATCHDOG"
kill_ranks() { local p; for p in $(pgrep -f "^$TPBATCH $WORK/job.yaml"); do kill -KILL "$p" 2>/dev/null || true; done; }
trap 'kill_ranks; rm -rf "$WORK"' EXIT
export TPBATCH_TEST_SLEEP_AT="0:run:$((2 * WATCHDOG))"

run() {  # run LOG [env...]: the job on 4 ranks, bounded; prints the exit code
  local log=$1
  shift
  set +e
  env "$@" timeout -s KILL 120 mpirun -np 4 --oversubscribe --bind-to none -x TPBATCH_TEST_SLEEP_AT \
    -x TPBATCH_LIVENESS -x TPBATCH_HEARTBEAT_STATS "$TPBATCH" "$WORK/job.yaml" 2>"$log"
  echo $?
  set -e
  kill_ranks
}

t0=$(date +%s.%N)
rc=$(run "$WORK/heartbeats.log" TPBATCH_LIVENESS= TPBATCH_HEARTBEAT_STATS=1)
took=$($PY -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
echo "heartbeats: exit $rc in $took s (watchdog $WATCHDOG s, rank 0 sleeping $((2 * WATCHDOG)) s)"
grep "heartbeats:" "$WORK/heartbeats.log" || true
grep -q "rank 0 sleeps" "$WORK/heartbeats.log" || fail "rank 0 did not sleep: $(tail -5 "$WORK/heartbeats.log")"
[ "$rc" = 0 ] || fail "a healthy job failed (exit $rc): $(grep -v '\[tpbatch\]' "$WORK/heartbeats.log" | head -5)"
$PY - "$WORK/out.h5" "$N" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1], "r")
assert int(f.attrs["complete"]) == 1 and int(f["done"][:].sum()) == int(sys.argv[2]), "rows missing"
print("every row done")
PY

rc=$(run "$WORK/per_call.log" TPBATCH_LIVENESS=per-call)
echo "per-call watchdog: exit $rc"
grep -m1 "stalled" "$WORK/per_call.log" || true
[ "$rc" != 0 ] && [ "$rc" != 137 ] || fail "the per-call watchdog did not end the job (exit $rc): the test cannot show anything"
grep -q "stalled for" "$WORK/per_call.log" || fail "no watchdog message: $(tail -5 "$WORK/per_call.log")"
