#!/usr/bin/env bash
# Incremental runs over a growing data set: lines appended to the input after a complete run, the
# old lines byte for byte as they were, are computed on resume (and only they: the run's
# last_run_output_tokens are the new rows'), and the file equals a run over the whole grown input.
# An input whose old lines changed is still refused (exit 2).
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
line() { printf '{"id": "%s", "prompt": "%s"}\n' "$1" "$2"; }
{ line a "Once upon a time"; line b "The little dog"; line c "Lily liked"; } >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "sampling:" "  max_new_tokens: 4" \
  "  ignore_eos: true"
sed -i 's/^  if_exists: overwrite$/  if_exists: resume/' "$WORK/job.yaml"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the first run failed"
cp "$WORK/out.h5" "$WORK/three.h5"
{ line d "Tom had a ball"; line e "The sun was"; } >>"$WORK/in.jsonl"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "resume of the grown input failed: $(tail -2 "$WORK/log")"
grep -q "the input grew from 3 to 5 rows" "$WORK/log" || fail "no word of the grown input: $(cat "$WORK/log")"
$PY - "$WORK/out.h5" <<'PY' || fail "the resumed run computed more than the new lines"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["complete"] == 1 and f.attrs["num_rows"] == 5
assert f["metrics"].attrs["last_run_output_tokens"] == 2 * 4, f["metrics"].attrs["last_run_output_tokens"]
PY
"$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/whole.h5" 2>/dev/null || fail "the run over the whole input failed"
results_equal "$WORK/whole.h5" "$WORK/out.h5" || fail "the grown file differs from a run over the whole input"

cp "$WORK/three.h5" "$WORK/changed.h5"
sed -i '1s/Once upon a time/Once upon a day/' "$WORK/in.jsonl"
set +e
"$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/changed.h5" 2>"$WORK/log"
rc=$?
set -e
[ "$rc" = 2 ] || fail "an input whose old lines changed was accepted (exit $rc)"
echo "changed old lines refused: $(grep -o 'cannot be resumed: [^(]*' "$WORK/log")"
