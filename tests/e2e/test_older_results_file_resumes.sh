#!/usr/bin/env bash
# A results file written before /top_logprob_tokens, /top_logprobs and /reasoning_text existed (format_version 1)
# still exports, inspects and resumes: closed cleanly (continued in place, the datasets created) and
# cut off (rebuilt into a fresh file); the rows it had are kept, the missing ones computed.
source "$(dirname "$0")/lib.sh"
need_stories
write_job "$WORK/job.yaml" "$STORIES" "$HERE/prompts_mixed.jsonl" "$WORK/ref.h5" "sampling:" "  max_new_tokens: 12"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "reference run failed"
for kind in clean cut; do
  cp "$WORK/ref.h5" "$WORK/$kind.h5"
  $PY - "$WORK/$kind.h5" "$kind" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    del f["top_logprob_tokens"], f["top_logprobs"], f["reasoning_text"]  # as a file from before they existed
    f.attrs["format_version"] = 1
    f["done"][1] = 0                                  # one row still to compute
    f.attrs["complete"] = 0
    if sys.argv[2] == "cut":
        f.attrs["writer_open"] = 1                    # its last run was killed
PY
  "$TPBATCH" export "$WORK/$kind.h5" --format jsonl >"$WORK/$kind.jsonl" || fail "$kind: export of an older file failed"
  "$TPBATCH" inspect "$WORK/$kind.h5" >/dev/null || fail "$kind: inspect of an older file failed"
  "$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/$kind.h5" --set output.if_exists=resume 2>"$WORK/$kind.log" ||
    { cat "$WORK/$kind.log"; fail "$kind: resume of an older file failed"; }
  $PY - "$WORK/ref.h5" "$WORK/$kind.h5" <<'PY' || fail "$kind: resumed older file differs"
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert b.attrs["complete"] == 1, "not complete"
assert "top_logprob_tokens" in b and b["top_logprob_tokens"].shape == a["done"].shape
assert "reasoning_text" in b and b["reasoning_text"].shape == a["done"].shape
assert b.attrs["format_version"] == a.attrs["format_version"], "not brought to the current format"
for k in ("output_tokens", "prompt_tokens"):
    assert [list(x) for x in a[k][:]] == [list(x) for x in b[k][:]], k
assert list(a["output_text"][:]) == list(b["output_text"][:])
PY
done
echo "older results files resume"
