#!/usr/bin/env bash
# Failures with `device: cuda` on the emulated device, TP=2 over the NCCL stand-in (two ranks):
# - kill -9 of the peer rank mid-job (rank 0 frozen after 16 flushed rows, then the peer killed):
#   every rank ends, and a resume completes the file to what an uninterrupted run computes;
# - SIGSTOP of the peer while rank 0 waits on the stream for its NCCL all-reduces: the heartbeat
#   watchdog ends the job, non-zero, naming the silent rank, and rank 0 exits through a stream that
#   will never drain (no hang in the teardown of the backend or the communicators).
source "$(dirname "$0")/lib_emu.sh"
export TPBATCH_CHECKED_BACKEND=0 CUEMU_DEVICES=2
$PY - "$WORK/in.jsonl" <<'PY'
import json, sys
words = "Once upon a time there was a little girl named Lily who loved to play in the park".split()
with open(sys.argv[1], "w") as f:
    for i in range(48):
        f.write(json.dumps({"id": f"r{i}", "prompt": " ".join(words[: 3 + i % 12])}) + "\n")
PY
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/full.h5" "device: cuda" \
  "parallel:" "  tensor: 2" "sampling:" "  max_new_tokens: 24" "  ignore_eos: true" \
  "engine:" "  max_seqs: 8" "  progress_interval: 0.2" "  watchdog_seconds: 3"
mpirun_tpbatch 2 "$WORK/job.yaml" 2>"$WORK/full.log" || { tail -5 "$WORK/full.log"; fail "the uninterrupted run"; }

rank_pids() { pgrep -f "^$TPBATCH $WORK/job.yaml" | sort -n; }
kill_ranks() { local p; for p in $(rank_pids); do kill -KILL "$p" 2>/dev/null || true; done; }
trap 'kill_ranks; rm -rf "$WORK"' EXIT

# start_frozen OUT: the job with rank 0 freezing itself after 16 flushed rows; sets PIDS, MPIRUN.
start_frozen() {
  TPBATCH_TEST_STOP_AFTER_ROWS=16 timeout -s KILL 300 mpirun -np 2 --oversubscribe --bind-to none \
    -x TPBATCH_TEST_STOP_AFTER_ROWS -x CUEMU_DEVICES "$TPBATCH" "$WORK/job.yaml" --set output.path="$1" \
    --set output.if_exists=overwrite 2>"$WORK/run.log" &
  MPIRUN=$!
  local frozen=
  for _ in $(seq 1200); do
    mapfile -t PIDS < <(rank_pids)
    if [ "${#PIDS[@]}" = 2 ] && [ "$(ps -o stat= -p "${PIDS[0]}" | cut -c1)" = T ]; then frozen=1; break; fi
    kill -0 "$MPIRUN" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$frozen" ] || fail "rank 0 did not stop after 16 rows: $(tail -3 "$WORK/run.log")"
}

echo "== kill -9 of rank 1, then resume"
start_frozen "$WORK/killed.h5"
kill -KILL "${PIDS[1]}"
kill -CONT "${PIDS[0]}" 2>/dev/null || true
t0=$(date +%s)
wait "$MPIRUN" || true
echo "every rank gone $(($(date +%s) - t0)) s after the kill"
[ -z "$(rank_pids)" ] || fail "ranks still alive after the job ended"
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/killed.h5" --set output.if_exists=resume 2>"$WORK/resume.log" ||
  { tail -5 "$WORK/resume.log"; fail "the resume"; }
identical "$WORK/killed.h5" "$WORK/full.h5" "the resumed file against the uninterrupted run"

echo "== SIGSTOP of rank 1 while rank 0 waits for its all-reduces"
start_frozen "$WORK/stopped.h5"
kill -STOP "${PIDS[1]}"
kill -CONT "${PIDS[0]}"
t0=$(date +%s)
set +e
wait "$MPIRUN"
rc=$?
set -e
took=$(($(date +%s) - t0))
kill -KILL "${PIDS[1]}" 2>/dev/null || true
echo "mpirun exited $rc after $took s (watchdog 3 s)"
[ "$rc" != 0 ] || fail "exit 0 after a rank was stopped"
[ "$rc" != 137 ] || fail "the job hung: killed by the test's bound; $(tail -5 "$WORK/run.log")"
grep -q "rank 1 (host [^)]*) is silent" "$WORK/run.log" || fail "no message naming rank 1 as silent: $(tail -5 "$WORK/run.log")"
[ "$took" -lt 40 ] || fail "took $took s to end"
echo PASS
