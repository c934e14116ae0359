#!/usr/bin/env bash
# The results file survives a kill at any instant: a small job (3 rows finishing at different steps,
# output.flush_rows: 1, so each row is its own journal append) is killed with SIGKILL at each of its
# writes, syncs, renames, truncations and removals under the output path in turn -- creating the
# file, every flush, the commit in finish() -- then resumed; every resumed file must equal the
# uninterrupted run's, with nothing left beside it. Writes to the journal are also cut in half
# before the kill (a torn record). Then the same walk over a resumed run: the file is first killed
# after its first row, and the resume (copy, journal replay, flushes, commit) is killed at each of
# its own changes and resumed again. Kills are placed by an LD_PRELOAD counter (kill_at_write.c),
# never by timing; the steps run four at a time (a run mostly waits on MPI's start-up).
source "$(dirname "$0")/lib.sh"
build_kill_at_write
need_numpy_h5py
printf '%s\n' '{"id": "a", "prompt": "Once upon a time", "max_new_tokens": 2}' \
  '{"id": "b", "prompt": "The little dog", "max_new_tokens": 5}' \
  '{"id": "c", "prompt": "Lily liked to play", "max_new_tokens": 9}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/ref.h5" \
  "  flush_rows: 1" "sampling:" "  ignore_eos: true"
sed -i 's/^  if_exists: overwrite$/  if_exists: resume/' "$WORK/job.yaml"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the uninterrupted run failed"

# trace_of DIR: the counted changes of an uninterrupted run on DIR/out.h5 ("N call path" lines).
trace_of() {
  KILL_PREFIX="$1/out.h5" KILL_TRACE="$1/trace" LD_PRELOAD="$WORK/kill_at_write.so" \
    "$TPBATCH" "$WORK/job.yaml" --set output.path="$1/out.h5" >/dev/null 2>&1 || fail "the traced run failed"
  cat "$1/trace"
}

# step DIR K TORN WHAT: DIR (prepared) killed at change K, then resumed; the result is DIR/out.h5.
step() {
  local dir=$1 k=$2 torn=$3 what=$4 rc
  rc=$(KILL_TORN=$torn run_killed_at "$k" "$dir/out.h5" "$WORK/job.yaml" --set output.path="$dir/out.h5")
  if [ "$rc" != 137 ]; then
    echo "the run to kill at change $k ($what) exited $rc, not by the kill" >"$dir/failed"
  elif ! timeout 120 "$TPBATCH" "$WORK/job.yaml" --set output.path="$dir/out.h5" 2>"$dir/resume.log"; then
    echo "resume after a kill at change $k ($what, torn $torn) failed: $(tail -2 "$dir/resume.log")" >"$dir/failed"
  fi
}

# walk NAME START: every change K of a run starting from the files in START (empty: a fresh job),
# and torn for each journal write, as steps.
walk() {
  local name=$1 start=$2 k what torn dir
  mkdir -p "$WORK/trace-$name"
  cp -r "$start/." "$WORK/trace-$name/"
  mapfile -t trace < <(trace_of "$WORK/trace-$name")
  echo "$name: ${#trace[@]} changes to walk:$(printf '%s\n' "${trace[@]}" | awk '{print $2}' | sort | uniq -c | tr -s ' \n' ' ')"
  for k in $(seq 1 "${#trace[@]}"); do
    what=${trace[$((k - 1))]}
    for torn in 0 1; do
      [ "$torn" = 0 ] || [ "$(echo "$what" | awk '{print $2}')" = write ] || continue
      dir="$WORK/step-$name-$k-$torn"
      mkdir "$dir"
      cp -r "$start/." "$dir/"
      step "$dir" "$k" "$torn" "$what" &
      while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n || true; done
    done
  done
  wait
  for dir in "$WORK"/step-"$name"-*; do [ ! -f "$dir/failed" ] || fail "$name: $(cat "$dir/failed")"; done
}

mkdir "$WORK/fresh"
walk fresh "$WORK/fresh"

# A file killed right after its first row's journal record was synced (the header's sync is the
# first fdatasync); the second walk starts from copies of it.
mkdir "$WORK/first-trace" "$WORK/killed"
first_sync=$(trace_of "$WORK/first-trace" | awk '$2 == "fdatasync" {print $1}' | sed -n 2p)
[ "$(run_killed_at $((first_sync + 1)) "$WORK/killed/out.h5" "$WORK/job.yaml" --set output.path="$WORK/killed/out.h5")" = 137 ] ||
  fail "the first run did not stop after its first row"
walk resumed "$WORK/killed"

results_equal "$WORK/ref.h5" "$WORK"/step-*/out.h5 || fail "a resumed file differs from the uninterrupted run"
