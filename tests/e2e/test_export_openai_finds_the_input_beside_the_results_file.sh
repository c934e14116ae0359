#!/usr/bin/env bash
# export --format openai reads the job's input (each output line's kind and model come from it). It
# finds it wherever export runs from: where the job read it; after the job's folder was moved,
# where it lay relative to the results file; it says on standard error which file it used. When it
# finds none, it exits 2 naming the places it looked and --input.
source "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/job/data" "$WORK/job/out" "$WORK/elsewhere"
printf '%s\n' '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "Once upon a time", "max_tokens": 2}}' \
  >"$WORK/job/data/in.jsonl"
(cd "$WORK/job" && write_job job.yaml "$STORIES" data/in.jsonl out/r.h5 && "$TPBATCH" job.yaml 2>/dev/null) ||
  fail "the run failed"

export_from() {  # DIR RESULTS: export run from DIR; its stderr in $WORK/log
  (cd "$1" && "$TPBATCH" export "$2" --format openai >"$WORK/out.jsonl" 2>"$WORK/log")
}
export_from "$WORK/elsewhere" "$WORK/job/out/r.h5" || fail "export from another folder failed: $(cat "$WORK/log")"
grep -q "the job's input is '$WORK/job/data/in.jsonl'" "$WORK/log" || fail "export does not say which input: $(cat "$WORK/log")"

mv "$WORK/job" "$WORK/moved"
export_from "$WORK/elsewhere" "$WORK/moved/out/r.h5" || fail "export of the moved job failed: $(cat "$WORK/log")"
grep -q "the job's input is '$WORK/moved/data/in.jsonl' (where it lay relative to the results file)" "$WORK/log" ||
  fail "export of the moved job does not say it used the moved input: $(cat "$WORK/log")"
grep -q '"custom_id":"a"' "$WORK/out.jsonl" || fail "export of the moved job: $(cat "$WORK/out.jsonl")"

rm "$WORK/moved/data/in.jsonl"
set +e
export_from "$WORK/elsewhere" "$WORK/moved/out/r.h5"
rc=$?
set -e
[ "$rc" = 2 ] || fail "export without its input exited $rc, want 2"
grep -q "cannot find the job's input file (looked at .*'$WORK/moved/data/in.jsonl'.*give --input" "$WORK/log" ||
  fail "the error does not name where it looked and --input: $(cat "$WORK/log")"
echo "$(cut -c1-300 "$WORK/log")"
