#!/usr/bin/env bash
# SIGTERM to the leader of replica 1 only (the OOM killer, an admin) at TP=1 x DP=2.
# That replica stops gracefully while still holding rows. Rank 0 must hand those rows out again to
# replica 0 (the job then completes, exit 0, every row done), or fail naming the missing rows; a run
# ending with complete=0 must never exit 0. The signal is sent once the log shows 64 rows done; rows
# are long (128 new tokens) and each replica reads 64 rows ahead, so replica 1 holds rows whatever
# the load. 32 sequences per replica: a loaded run's time follows its step count (8 took 273 s of
# the launcher's 300 s beside two CPU burners, builds and other tests at load 9).
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
N=300
write_varied_prompts "$WORK/in.jsonl" "$N" 3 12
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 128" "  ignore_eos: true" \
  "engine:" "  max_seqs: 32" "  progress_interval: 0.2"

timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/run.log" &
mpirun_pid=$!
n=
for _ in $(seq 3000); do
  n=$(grep -o "rows [0-9]*/$N" "$WORK/run.log" | tail -1 | grep -o '[0-9]*/' | tr -d / || true)
  [ -n "$n" ] && [ "$n" -ge 64 ] && break
  kill -0 "$mpirun_pid" 2>/dev/null || break
  sleep 0.1
done
mapfile -t pids < <(pgrep -f "^$TPBATCH $WORK/job.yaml" | sort -n)
[ "${#pids[@]}" = 2 ] || fail "expected 2 rank processes, found ${#pids[@]} (rows done: ${n:-none}): $(tail -3 "$WORK/run.log")"
echo "rows done before the signal: $n; SIGTERM to rank 1 (pid ${pids[1]}), the leader of replica 1"
kill -TERM "${pids[1]}"
set +e
wait "$mpirun_pid"
rc=$?
set -e
$PY - "$WORK/out.h5" "$rc" "$WORK/run.log" <<'PY'
import h5py, sys
path, rc, log = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
f = h5py.File(path, "r")
done, complete, n = int(f["done"][:].sum()), int(f.attrs["complete"]), f["done"].shape[0]
print(f"exit {rc}, complete={complete}, {done}/{n} rows done")
assert not (rc == 0 and complete == 0), "exit 0 with complete=0: rows missing silently"
if rc == 0:
    assert done == n, (done, n)
    for i in range(n):
        assert f["finish_reason"][i] == b"length", (i, f["finish_reason"][i])
        assert len(f["output_tokens"][i]) == 128, (i, len(f["output_tokens"][i]))
    # The usual path: replica 1 held rows when it stopped, and rank 0 handed them out again.
    print("rank 0 handed replica 1's rows out again" if "handed out again" in log else "replica 1 held no rows when it stopped")
    print("replica 1's rows were handed out again: the job completed")
else:
    assert "missing: input line" in log, "non-zero exit without naming the missing rows: " + log[-500:]
    print("the job failed naming the missing rows")
PY
