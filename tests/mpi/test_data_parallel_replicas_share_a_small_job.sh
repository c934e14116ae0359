#!/usr/bin/env bash
# Data-parallel replicas share a job too small to fill one: each takes its share of the lines, not
# whatever the first to ask can hold. Rank 0 used to hand replica 0 every line of a 32-line job
# (it keeps max_seqs running + lookahead waiting) before replica 1's first request was served, so
# DP=2 ran as slowly as one replica on one core (125M model: 20.5 s against 11.0 s shared).
# 8 lines at DP=2 must go 4 + 4, 9 lines at DP=3 3 + 3 + 3, and every row must be done.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
$PY - "$WORK/in.jsonl" <<'PY'
import json, sys
words = "Once upon a time there was a little girl named Lily".split()
with open(sys.argv[1], "w") as f:
    for i in range(9):
        f.write(json.dumps({"id": f"r{i}", "prompt": " ".join(words[: 2 + i])}) + "\n")
PY
head -8 "$WORK/in.jsonl" >"$WORK/in8.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in8.jsonl" "$WORK/dp2.h5" \
  "sampling:" "  max_new_tokens: 8" "engine:" "  max_seqs: 16"

check_shares() {  # log, expected "rank 0: 4, rank 1: 4", output, rows
  grep -q "handed to each replica, by its leader's rank: $2\$" "$1" ||
    fail "expected lines handed out as '$2'; the log says: $(grep -a 'handed to each replica' "$1" || tail -3 "$1")"
  $PY - "$3" "$4" <<'PY' || fail "rows missing in $3"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert int(f["done"][:].sum()) == int(sys.argv[2]) == f["done"].shape[0], (f["done"][:], sys.argv[2])
PY
}

mpirun_tpbatch 2 "$WORK/job.yaml" 2>"$WORK/dp2.log" || { tail -5 "$WORK/dp2.log"; fail "DP=2 job failed"; }
check_shares "$WORK/dp2.log" "rank 0: 4, rank 1: 4" "$WORK/dp2.h5" 8
mpirun_tpbatch 3 "$WORK/job.yaml" --set input.path="$WORK/in.jsonl" --set output.path="$WORK/dp3.h5" \
  2>"$WORK/dp3.log" || { tail -5 "$WORK/dp3.log"; fail "DP=3 job failed"; }
check_shares "$WORK/dp3.log" "rank 0: 3, rank 1: 3, rank 2: 3" "$WORK/dp3.h5" 9
echo "each replica took its share: 4 + 4 lines at DP=2, 3 + 3 + 3 at DP=3"
