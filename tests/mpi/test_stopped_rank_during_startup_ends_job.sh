#!/usr/bin/env bash
# A rank stopped during start-up (SIGSTOP) while the others wait in a start-up
# collective (collective_check's allreduce). The heartbeats must end every rank within about the
# watchdog time, non-zero, naming the silent rank. Start-up is far too short to hit from outside,
# so the rank stops itself there (TPBATCH_TEST_STOP_AT, reliability/fault_injection.h), exactly as
# `kill -STOP` would stop it. Each run is bounded; the stopped rank is killed.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
WATCHDOG=3
echo '{"id": "a", "prompt": "Once upon a time"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "engine:" "  watchdog_seconds: $WATCHDOG"
kill_ranks() { local p; for p in $(pgrep -f "^$TPBATCH $WORK/job.yaml"); do kill -KILL "$p" 2>/dev/null || true; done; }
trap 'kill_ranks; rm -rf "$WORK"' EXIT

for victim in 1 0; do
  log="$WORK/run$victim.log"
  t0=$(date +%s.%N)
  set +e
  TPBATCH_TEST_STOP_AT="$victim:start-up" timeout -s KILL 120 \
    mpirun -np 2 --oversubscribe --bind-to none -x TPBATCH_TEST_STOP_AT "$TPBATCH" "$WORK/job.yaml" 2>"$log"
  rc=$?
  set -e
  t1=$(date +%s.%N)
  kill_ranks
  took=$($PY -c "print(f'{$t1 - $t0:.1f}')")
  echo "rank $victim stopped in start-up: mpirun exited $rc after $took s from launch (watchdog $WATCHDOG s)"
  grep -q "rank $victim stops itself (SIGSTOP) at start-up" "$log" || fail "rank $victim did not stop: $(tail -5 "$log")"
  [ "$rc" != 0 ] || fail "exit 0 after a rank was stopped"
  [ "$rc" != 137 ] || fail "the job hung: killed by the test's bound; $(tail -5 "$log")"
  grep -q "rank $victim (host [^)]*) is silent" "$log" || fail "no message naming rank $victim as silent: $(tail -5 "$log")"
  grep "is silent" "$log" | head -2
  # From launch: start-up (a few seconds under load) + the watchdog time + mpirun's teardown.
  $PY -c "import sys; sys.exit(0 if $took < $WATCHDOG + 25 else 1)" || fail "took $took s"
done
