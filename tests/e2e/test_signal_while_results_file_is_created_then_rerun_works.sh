#!/usr/bin/env bash
# SIGINT or SIGTERM (scancel; SIGKILL: test_results_survive_a_kill_at_every_write) while a job
# creates its results file -- when it records its first row, so the signal either ends the process
# at once or is taken by the graceful-stop handler (exit 1, finished rows kept) -- at each of the
# creation's writes, syncs and renames in turn: rerunning the same job (if_exists: resume, the
# default) just works and gives the uninterrupted run's file. The output path never holds a stub:
# before the new file is renamed into place there is no file (or the previous one) at all.
# Kills are placed by an LD_PRELOAD counter (kill_at_write.c), never by timing.
source "$(dirname "$0")/lib.sh"
build_kill_at_write
need_numpy_h5py
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' '{"id": "b", "prompt": "The little dog"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/ref.h5" "sampling:" "  max_new_tokens: 4"
sed -i 's/^  if_exists: overwrite$/  if_exists: resume/' "$WORK/job.yaml"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the uninterrupted run failed"

mkdir "$WORK/trace"
KILL_PREFIX="$WORK/trace/out.h5" KILL_TRACE="$WORK/trace/changes" LD_PRELOAD="$WORK/kill_at_write.so" \
  "$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/trace/out.h5" >/dev/null 2>&1 || fail "the traced run failed"
# Creation: every change before the run's partial file is copied from the new results file.
creation=$(awk '$2 == "copy_file_range" {print $1 - 1; exit}' "$WORK/trace/changes")
[ "${creation:-0}" -ge 5 ] || fail "the trace shows no creation: $(head -5 "$WORK/trace/changes")"
echo "creating the results file: $creation changes ($(head -"$creation" "$WORK/trace/changes" | awk '{print $2}' | tr '\n' ' '))"

step() {  # DIR SIGNAL K
  local dir=$1 sig=$2 k=$3 rc
  rc=$(KILL_SIGNAL=$sig run_killed_at "$k" "$dir/out.h5" "$WORK/job.yaml" --set output.path="$dir/out.h5")
  [ "$rc" = $((128 + sig)) ] || [ "$rc" = 1 ] ||
    { echo "signal $sig at change $k: the run exited $rc, neither by the signal nor stopped by it" >"$dir/failed"; return; }
  if [ -e "$dir/out.h5" ] && [ ! -s "$dir/out.h5" ]; then echo "signal $sig at change $k left an empty stub" >"$dir/failed"; return; fi
  timeout 120 "$TPBATCH" "$WORK/job.yaml" --set output.path="$dir/out.h5" 2>"$dir/rerun.log" ||
    echo "signal $sig at change $k: the rerun failed: $(tail -2 "$dir/rerun.log")" >"$dir/failed"
}
# SIGINT and SIGTERM take turns over the changes (both end the process the same way there).
for k in $(seq 1 "$creation"); do
  sig=$((k % 2 ? 2 : 15))
  mkdir "$WORK/step-$sig-$k"
  step "$WORK/step-$sig-$k" "$sig" "$k" &
  while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n || true; done
done
wait
for dir in "$WORK"/step-*; do [ ! -f "$dir/failed" ] || fail "$(cat "$dir/failed")"; done
results_equal "$WORK/ref.h5" "$WORK"/step-*/out.h5 || fail "a rerun file differs from the uninterrupted run"
