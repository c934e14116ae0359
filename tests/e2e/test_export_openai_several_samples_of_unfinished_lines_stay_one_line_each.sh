#!/usr/bin/env bash
# export --format openai writes one line per input line also when the job never finished its rows
# and the lines ask for several samples (n: 2, two results rows each): each line's rows are its
# choices, counted from the line as the job counted them, with the line's custom_id. The job is
# stopped (SIGSTOP, TPBATCH_TEST_STOP_AFTER_ROWS) after recording its first row and killed.
source "$(dirname "$0")/lib.sh"
req() { printf '{"custom_id": "%s", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "%s", "max_tokens": 3, "n": 2}}\n' "$@"; }
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
ids = [l["id"] for l in lines]
assert len(set(ids)) == 3 and all(i.endswith(f"-{k}") for k, i in enumerate(ids)), ids
print(f"{len(unfinished)} unfinished rows, custom_ids: {[l['custom_id'] for l in unfinished]}")
PY
