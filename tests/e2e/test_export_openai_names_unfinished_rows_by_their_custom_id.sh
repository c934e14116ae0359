#!/usr/bin/env bash
# export --format openai writes every input line's custom_id, also for the rows the job never
# finished (taken from the input line): the user can tell which requests to send again. The job is
# stopped (SIGSTOP, TPBATCH_TEST_STOP_AFTER_ROWS) after recording its first row and killed, so its
# results file holds no finished row.
source "$(dirname "$0")/lib.sh"
req() { printf '{"custom_id": "%s", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "%s", "max_tokens": 3}}\n' "$@"; }
{ req first "Once upon a time"; req second "The little dog"; req third "A cat"; } >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5"
stop_after_first_row "$WORK/job.yaml" "$WORK/run.log"
"$TPBATCH" export "$WORK/r.h5" --format openai --output "$WORK/out.jsonl" 2>"$WORK/export.log" ||
  fail "export failed: $(cat "$WORK/export.log")"
$PY - "$WORK/out.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["custom_id"] for l in lines] == ["first", "second", "third"], [l["custom_id"] for l in lines]
unfinished = [l for l in lines if l["error"] and l["error"]["code"] == "not_computed"]
assert unfinished, "no unfinished row: the test shows nothing"
print(f"{len(unfinished)} unfinished rows, custom_ids: {[l['custom_id'] for l in unfinished]}")
PY
