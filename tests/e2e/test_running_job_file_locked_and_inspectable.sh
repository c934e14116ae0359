#!/usr/bin/env bash
# On one running job A:
#  - `tpbatch inspect` works on A's file while A writes it (read-only, no lock needed);
#  - a second job B on the same output with if_exists: overwrite fails (exit 2, "locked") without
#    touching the file (it used to truncate it, and A still exited 0); with if_exists: resume it
#    fails too, and its message does not suggest overwrite;
#  - A, stopped by SIGTERM once the checks are done (its 2,000 long rows would take minutes), exits
#    as an interrupted job does, its file readable with at least the rows inspect saw.
# Observable state only: inspect's row count, the jobs' exit codes; every wait bounded.
source "$(dirname "$0")/lib.sh"
need_stories
N=2000
write_prompts "$WORK/in.jsonl" "$N"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 200" "  ignore_eos: true" "engine:" "  max_seqs: 4"
timeout 300 "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/a.log" &
a_pid=$!

rows=0
for _ in $(seq 3000); do
  kill -0 "$a_pid" 2>/dev/null || break
  if "$TPBATCH" inspect "$WORK/out.h5" >"$WORK/inspect.txt" 2>"$WORK/inspect.err"; then
    rows=$(sed -n 's/^rows *\([0-9]*\) \/.*/\1/p' "$WORK/inspect.txt")
    [ "${rows:-0}" -ge 1 ] && break
  fi
  sleep 0.1
done
kill -0 "$a_pid" 2>/dev/null || fail "job A ended before inspect could read its file: $(cat "$WORK/inspect.err" 2>/dev/null)"
[ "${rows:-0}" -ge 1 ] || fail "inspect never read rows of the running job: $(cat "$WORK/inspect.err")"
grep -q "^complete *no" "$WORK/inspect.txt" || fail "inspect of a running job says complete: $(cat "$WORK/inspect.txt")"
echo "inspect on the running job: $rows rows done"

set +e
timeout 60 "$TPBATCH" "$WORK/job.yaml" --set output.if_exists=overwrite >/dev/null 2>"$WORK/b.log"
b_rc=$?
timeout 60 "$TPBATCH" "$WORK/job.yaml" --set output.if_exists=resume >/dev/null 2>"$WORK/c.log"
c_rc=$?
set -e
[ "$b_rc" = 2 ] || fail "job B (overwrite) exited $b_rc, want 2: $(tail -2 "$WORK/b.log")"
grep -q "locked by another running tpbatch job" "$WORK/b.log" || fail "job B's message: $(tail -2 "$WORK/b.log")"
[ "$c_rc" = 2 ] || fail "job C (resume) exited $c_rc, want 2: $(tail -2 "$WORK/c.log")"
grep -q "locked by another running tpbatch job" "$WORK/c.log" || fail "job C's message: $(tail -2 "$WORK/c.log")"
grep -q "overwrite" "$WORK/c.log" && fail "job C's refusal suggests overwrite while another job holds the file: $(tail -2 "$WORK/c.log")"
"$TPBATCH" inspect "$WORK/out.h5" >"$WORK/inspect2.txt" || fail "inspect after job B failed"
rows2=$(sed -n 's/^rows *\([0-9]*\) \/.*/\1/p' "$WORK/inspect2.txt")
[ "${rows2:-0}" -ge "$rows" ] || fail "job A's file lost rows after job B: $rows2 < $rows"
echo "jobs B and C refused; A's file intact ($rows2 rows)"

kill -TERM "$a_pid"
set +e
wait "$a_pid"
a_rc=$?
set -e
[ "$a_rc" = 1 ] || fail "job A exited $a_rc after SIGTERM, want 1: $(tail -3 "$WORK/a.log")"
grep -q "interrupted by a signal" "$WORK/a.log" || fail "job A did not stop cleanly: $(tail -3 "$WORK/a.log")"
$PY -c "
import h5py; f = h5py.File('$WORK/out.h5', 'r')
d = int(f['done'][:].sum())
assert $rows2 <= d < $N, d
assert all(len(f['output_tokens'][i]) == 200 for i in range($N) if f['done'][i])
print('job A stopped with', d, 'rows in its file')"
