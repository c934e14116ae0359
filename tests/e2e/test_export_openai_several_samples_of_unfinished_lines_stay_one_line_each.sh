#!/usr/bin/env bash
# export --format openai writes one line per input line also when the job never finished its rows
# and the lines ask for several samples (n: 2, two results rows each): each line's rows are its
# choices, counted from the line as the job counted them, with the line's custom_id. The job is
# stopped (SIGSTOP, TPBATCH_TEST_STOP_AFTER_ROWS) after recording its first row and killed.
source "$(dirname "$0")/lib.sh"
req() { printf '{"custom_id": "%s", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "%s", "max_tokens": 3, "n": 2}}\n' "$@"; }
{ req first "Once upon a time"; req second "The little dog"; req third "A cat"; } >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5"
TPBATCH_TEST_STOP_AFTER_ROWS=1 "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/run.log" &
pid=$!  # tpbatch itself: its state is what is watched
trap 'kill -KILL "$pid" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1200); do  # until it has stopped itself (or ended)
  [ "$(ps -o stat= -p "$pid" | cut -c1)" = T ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ "$(ps -o stat= -p "$pid" | cut -c1)" = T ] || fail "the job did not stop after its first row: $(tail -3 "$WORK/run.log")"
kill -KILL "$pid"
wait "$pid" || true
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
