#!/usr/bin/env bash
# The disk fills up mid-job. The job must fail naming the results file (never exit
# 0), every row its file marks done must hold that row's real data (rows are marked done only once
# their data is on the disk), and resuming on a disk with room again must give a complete file equal,
# row for row, to an uninterrupted run's. The "disk" is a small tmpfs the test mounts itself (in a
# private mount namespace when it can); without mount rights the test is skipped. Two sizes: one
# that fills after some flushes, one that fills almost at once.
source "$(dirname "$0")/lib.sh"
need_stories
if [ -z "${TPBATCH_IN_MOUNT_NS:-}" ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
  # Re-run inside a private mount namespace: the mounts vanish with it, whatever happens.
  rm -rf "$WORK"
  trap - EXIT
  TPBATCH_IN_MOUNT_NS=1 exec unshare -m bash "$0" "$@"
fi
MNT="$WORK/disk"
mkdir -p "$MNT"
mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs (needs root or a user namespace)"; exit 77; }
trap 'umount "$MNT" 2>/dev/null; rm -rf "$WORK"' EXIT

N=240
write_varied_prompts "$WORK/in.jsonl" "$N" 2 14 row-
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/full.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true" "engine:" "  max_seqs: 16"
timeout 300 "$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the uninterrupted run failed"

for size in 200k 48k; do
  umount "$MNT" 2>/dev/null || true
  mount -t tmpfs -o size=$size tmpfs "$MNT"
  set +e
  timeout 300 "$TPBATCH" "$WORK/job.yaml" --set output.path="$MNT/out.h5" 2>"$WORK/run.log"
  rc=$?
  set -e
  [ "$rc" != 0 ] || fail "disk of $size: the job exited 0 although the disk was full"
  grep -q "results file '$MNT/out.h5'" "$WORK/run.log" || fail "disk of $size: the error does not name the results file: $(tail -3 "$WORK/run.log")"
  echo "disk of $size: exit $rc: $(grep -m1 'error' "$WORK/run.log" | cut -c1-200)"
  # More room (what a user does after freeing space), then resume the same job on the same file.
  mount -o remount,size=64m "$MNT"
  if [ -s "$MNT/out.h5" ] && $PY -c "import h5py, sys; h5py.File(sys.argv[1], 'r')" "$MNT/out.h5" 2>/dev/null; then
    $PY - "$WORK/full.h5" "$MNT/out.h5" <<'PY'
import h5py, sys
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
done = [i for i in range(b["done"].shape[0]) if b["done"][i]]
for i in done:  # every row marked done holds that row's data
    for name in ["id", "prompt_tokens", "output_tokens", "output_text", "finish_reason"]:
        x, y = a[name][i], b[name][i]
        same = list(x) == list(y) if hasattr(x, "__len__") and not isinstance(x, bytes) else x == y
        assert same, f"row {i} marked done but {name} differs: {y!r} vs {x!r}"
print(f"  {len(done)} rows marked done in the cut-off file, all with their data")
PY
  else
    echo "  the cut-off file is not readable as HDF5: resume must start it again"
  fi
  set +e
  timeout 300 "$TPBATCH" "$WORK/job.yaml" --set output.path="$MNT/out.h5" --set output.if_exists=resume 2>"$WORK/resume.log"
  rc=$?
  set -e
  if [ "$rc" = 2 ] && grep -q "cannot be resumed" "$WORK/resume.log"; then
    # A file HDF5 cannot open at all: resume refuses it, naming it; overwrite starts it again.
    echo "  resume refused the unreadable file: $(grep -m1 'cannot be resumed' "$WORK/resume.log" | cut -c1-160)"
    timeout 300 "$TPBATCH" "$WORK/job.yaml" --set output.path="$MNT/out.h5" 2>"$WORK/resume.log" ||
      fail "disk of $size: the run after freeing space failed: $(tail -3 "$WORK/resume.log")"
  elif [ "$rc" != 0 ]; then
    fail "disk of $size: resume exited $rc: $(tail -3 "$WORK/resume.log")"
  fi
  $PY - "$WORK/full.h5" "$MNT/out.h5" <<'PY'
import h5py, sys
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert b.attrs["complete"] == 1, "resumed file not complete"
for name in ["id", "done", "prompt_tokens", "output_tokens", "output_text", "finish_reason", "error"]:
    for i in range(a[name].shape[0]):
        x, y = a[name][i], b[name][i]
        same = list(x) == list(y) if hasattr(x, "__len__") and not isinstance(x, bytes) else x == y
        assert same, f"{name}[{i}] differs after resume: {y!r} vs {x!r}"
print("  resumed file equals the uninterrupted run")
PY
  rm -f "$MNT/out.h5"
done
