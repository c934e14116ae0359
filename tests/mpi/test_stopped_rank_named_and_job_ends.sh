#!/usr/bin/env bash
# SIGSTOP of rank 0 (the row dispatcher) or rank 1 (the leader of replica 1) at
# TP=1 x DP=2 while rows are computed. The others wait unwatched by time (rank 0 for results, the
# leader for rows); the heartbeats (reliability/heartbeat.h) must end every rank within about the
# watchdog time, non-zero, naming the silent rank. Each run is bounded; the stopped rank is killed.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
N=200
WATCHDOG=3
write_prompts "$WORK/in.jsonl" "$N" "Once upon a time there was a little girl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 100" "  ignore_eos: true" \
  "engine:" "  max_seqs: 2" "  progress_interval: 0.2" "  watchdog_seconds: $WATCHDOG"

# rank_pid R: the process of world rank R of this test's job.
rank_pid() {
  local p
  for p in $(pgrep -f "^$TPBATCH $WORK/job.yaml"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p" && return
  done
}
# Whatever happens, no rank of this test outlives it (a stopped one included).
kill_ranks() { local p; for p in $(pgrep -f "^$TPBATCH $WORK/job.yaml"); do kill -KILL "$p" 2>/dev/null || true; done; }
trap 'kill_ranks; rm -rf "$WORK"' EXIT

for victim in 0 1; do
  log="$WORK/run$victim.log"
  timeout -s KILL 120 mpirun -np 2 --oversubscribe --bind-to none "$TPBATCH" "$WORK/job.yaml" 2>"$log" &
  mpirun_pid=$!
  # Rank 0 prints the KV cache line once every rank has loaded its shard: then the rows run.
  for _ in $(seq 1200); do
    grep -q "\[tpbatch\] KV cache:" "$log" && break
    kill -0 "$mpirun_pid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
  stopped=$(rank_pid "$victim")
  [ -n "$stopped" ] && [ -n "$(rank_pid $((1 - victim)))" ] || fail "the job's ranks are not running: $(tail -3 "$log")"
  kill -STOP "$stopped"
  t0=$(date +%s.%N)
  set +e
  wait "$mpirun_pid"
  rc=$?
  set -e
  t1=$(date +%s.%N)
  kill -KILL "$stopped" 2>/dev/null || true
  took=$($PY -c "print(f'{$t1 - $t0:.1f}')")
  echo "SIGSTOP of rank $victim while rows run: mpirun exited $rc after $took s (watchdog $WATCHDOG s)"
  [ "$rc" != 0 ] || fail "exit 0 after a rank was stopped"
  [ "$rc" != 137 ] || fail "the job hung: killed by the test's bound; $(tail -5 "$log")"
  grep -q "rank $victim (host [^)]*) is silent" "$log" || fail "no message naming rank $victim as silent: $(tail -5 "$log")"
  grep "is silent" "$log" | head -2
  # Detection needs the watchdog time plus a beat period; mpirun's teardown of a stopped rank adds
  # a little more. 20 s of slack keeps this robust on a loaded machine and still far below a hang.
  $PY -c "import sys; sys.exit(0 if $took < $WATCHDOG + 20 else 1)" || fail "took $took s"
done
