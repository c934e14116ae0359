#!/usr/bin/env bash
# A task: score or embed line carrying "n": 2 is one error row naming n (samples need task
# generate), and every row stays aligned with its line (row i = line i): it used to make two error
# rows and shift every later row by one.
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
printf '%s\n' '{"id": "a", "prompt": "Once upon a time", "completion": " there"}' \
  '{"id": "b", "prompt": "The little dog", "completion": " ran", "n": 2}' \
  '{"id": "c", "prompt": "Lily liked", "completion": " to"}' >"$WORK/in.jsonl"
for task in score embed; do
  write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/$task.h5" "task: $task" \
    "input:" "  unknown_keys: ignore"
  # write_job already wrote an input: section; merge the extra key into it.
  $PY - "$WORK/job.yaml" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
first = lines.index("input:")
second = lines.index("input:", first + 1)
key = lines.pop(second + 1); lines.pop(second)
lines.insert(first + 1, key)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
  [ "$task" = embed ] && sed -i '/unknown_keys: ignore/d' "$WORK/job.yaml" && sed -i 's/, "completion": " [a-z]*"//' "$WORK/in.jsonl"
  timeout 120 "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "$task: exit $?: $(tail -3 "$WORK/log")"
  $PY - "$WORK/$task.h5" "$task" <<'PY' || fail "$task: rows are not one per line"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
ids = [x.decode() for x in f["id"][:]]
fin = [x.decode() for x in f["finish_reason"][:]]
err = [x.decode() for x in f["error"][:]]
assert ids == ["a", "b", "c"], ids
assert fin[1] == "error" and "'n'" in err[1], err[1]
assert fin[0] != "error" and fin[2] != "error", (fin, err)
print(sys.argv[2] + ": one error row for the line with n:", err[1])
PY
done
