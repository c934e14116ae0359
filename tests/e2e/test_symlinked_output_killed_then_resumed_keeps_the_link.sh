#!/usr/bin/env bash
# output.path a symbolic link to a results file elsewhere: the job, killed part-way (SIGKILL after
# its first row, placed by kill_at_write.c) and resumed, leaves the link a link, its target complete
# and equal to an uninterrupted run's, and writes its journal and partial file beside the target
# (never beside the link). The rebuilt file used to replace the link, the target stayed complete=0.
source "$(dirname "$0")/lib.sh"
build_kill_at_write
need_numpy_h5py
printf '%s\n' '{"id": "a", "prompt": "Once upon a time", "max_new_tokens": 2}' \
  '{"id": "b", "prompt": "The little dog", "max_new_tokens": 6}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/ref.h5" "  flush_rows: 1" \
  "sampling:" "  ignore_eos: true"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the uninterrupted run failed"
mkdir "$WORK/store" "$WORK/links"
ln -s ../store/real.h5 "$WORK/links/out.h5"  # relative, dangling until the job writes the target
# The second journal sync is the first row's: kill right after it, at the target's next change.
KILL_PREFIX="$WORK/store/real.h5" KILL_TRACE="$WORK/trace" LD_PRELOAD="$WORK/kill_at_write.so" \
  "$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/links/out.h5" >/dev/null 2>&1 || fail "the traced run failed"
grep -q "$WORK/links" "$WORK/trace" && fail "the job wrote beside the link: $(grep "$WORK/links" "$WORK/trace" | head -2)"
k=$(awk '$2 == "fdatasync" {print $1}' "$WORK/trace" | sed -n 2p)
rm -f "$WORK/store/"*
rc=$(run_killed_at $((k + 1)) "$WORK/store/real.h5" "$WORK/job.yaml" --set output.path="$WORK/links/out.h5" --set output.if_exists=resume)
[ "$rc" = 137 ] || fail "the run to kill exited $rc"
[ -L "$WORK/links/out.h5" ] || fail "the kill replaced the link"
"$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/links/out.h5" --set output.if_exists=resume 2>"$WORK/log" ||
  fail "resume through the link failed: $(tail -2 "$WORK/log")"
[ -L "$WORK/links/out.h5" ] || fail "resume replaced the link with a regular file"
[ "$(ls "$WORK/links")" = out.h5 ] || fail "files beside the link: $(ls "$WORK/links")"
grep -q "replayed from its journal" "$WORK/log" || fail "the resume did not replay the killed run's row: $(cat "$WORK/log")"
results_equal "$WORK/ref.h5" "$WORK/store/real.h5" || fail "the link's target differs from the uninterrupted run"
