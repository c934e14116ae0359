#!/usr/bin/env bash
# A JSONL line nested 100,000 levels deep -- in tokens_field, inside a chat message, in an OpenAI
# request -- is an error row naming the nesting (on_bad_line: record), the other rows are done, and
# the job, its resume and export end normally (they used to die by SIGSEGV in a recursive dump).
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
$PY - "$WORK/in.jsonl" <<'PY'
import json, sys
deep = "[" * 100000 + "]" * 100000
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"id": "ok-0", "ids": [1, 403, 407, 261, 378]}) + "\n")
    f.write('{"id": "deep-tokens", "ids": ' + deep + '}\n')
    f.write('{"id": "deep-chat", "messages": [{"role": "user", "content": ' + deep + '}]}\n')
    f.write('{"custom_id": "deep-request", "method": "POST", "url": "/v1/completions", "body": {"prompt": ' + deep + '}}\n')
    f.write(json.dumps({"id": "ok-4", "ids": [1, 378, 247, 155]}) + "\n")
PY
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "  tokens_field: ids" \
  "  on_bad_line: record" "sampling:" "  max_new_tokens: 3"
# tokens_field belongs under input:, the write_job helper's extra lines follow output:; move it.
$PY - "$WORK/job.yaml" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
lines.remove("  tokens_field: ids"); lines.remove("  on_bad_line: record")
i = lines.index("input:")
lines[i + 1:i + 1] = ["  tokens_field: ids", "  on_bad_line: record"]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
check() {
  $PY - "$WORK/out.h5" <<'PY' || fail "$1: $(tail -3 "$WORK/log")"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
fin = [x.decode() for x in f["finish_reason"][:]]
err = [x.decode() for x in f["error"][:]]
assert f.attrs["complete"] == 1 and list(f["done"][:]) == [1] * 5, list(f["done"][:])
assert fin[0] != "error" and fin[4] != "error", err
for i in (1, 2, 3):
    assert fin[i] == "error" and "nested more than 512 levels deep" in err[i], (i, err[i])
print("deep lines are error rows:", err[1])
PY
}
timeout 120 "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "the job exited $?: $(tail -3 "$WORK/log")"
check "first run"
timeout 120 "$TPBATCH" "$WORK/job.yaml" --set output.if_exists=resume 2>"$WORK/log" || fail "resume exited $?"
check "resume"
for format in jsonl openai; do
  timeout 60 "$TPBATCH" export "$WORK/out.h5" --format "$format" --output "$WORK/export.jsonl" 2>"$WORK/log" ||
    fail "export --format $format exited $?: $(tail -2 "$WORK/log")"
  [ "$(wc -l <"$WORK/export.jsonl")" = 5 ] || fail "export --format $format: not one line per row"
done
