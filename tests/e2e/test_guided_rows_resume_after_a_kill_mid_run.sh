#!/usr/bin/env bash
# Constrained rows survive a kill mid-run: a job with a job-level JSON Schema (greedy rows and a
# sampled one) and rows carrying their own constraint (guided_regex, guided_choice, guided_json)
# is killed with SIGKILL right after the first row's journal record is synced (output.flush_rows:
# 1), and again after the third's, while the other constrained rows are still generating, and
# resumed (two kills keep the test to a few runs). Every resumed file equals the
# uninterrupted run's: tokens, text, finish reasons, logprobs (results_equal). The matcher state of
# a row is a function of its tokens, so a row recomputed after a resume gets the same masks. Kills
# are placed by the LD_PRELOAD counter (kill_at_write.c), never by timing.
source "$(dirname "$0")/lib.sh"
build_kill_at_write
need_stories
need_numpy_h5py
$PY - "$WORK/in.jsonl" <<'PY'
import json, sys
rows = [
    {"id": "job-schema", "prompt": "Once upon a time"},
    {"id": "job-schema-sampled", "prompt": "Lily and Ben", "temperature": 0.8, "top_k": 20, "seed": 7},
    {"id": "row-regex", "prompt": "The dog", "guided_regex": r"[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\."},
    {"id": "row-choice", "prompt": "The cat was", "guided_choice": ["happy", "sad", "very tired"]},
    {"id": "row-schema", "prompt": "Tom had", "guided_json": {"type": "object", "properties": {
        "toys": {"type": "array", "items": {"type": "string"}, "maxItems": 2}, "happy": {"type": "boolean"}},
        "required": ["toys", "happy"]}},
    {"id": "job-schema-short", "prompt": "One day", "max_new_tokens": 6},
]
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/ref.h5" \
  "  flush_rows: 1" "sampling:" "  max_new_tokens: 60" "  temperature: 0.0" \
  "guided:" "  json: {type: object, properties: {name: {type: string}, age: {type: integer, minimum: 0}}, required: [name, age]}" \
  "  max_string_length: 8" "  max_items: 3"
sed -i 's/^  if_exists: overwrite$/  if_exists: resume/' "$WORK/job.yaml"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/ref.log" || { cat "$WORK/ref.log"; fail "the uninterrupted run failed"; }
# The rows are constrained (not error rows) and end at different steps, so a kill after one row's
# record finds others mid-generation.
$PY - "$WORK/ref.h5" <<'PY' || fail "the uninterrupted run is not the constrained run this test needs"
import h5py, json, re, sys
f = h5py.File(sys.argv[1], "r")
ids = [x.decode() for x in f["id"][:]]
text = dict(zip(ids, (x.decode() for x in f["output_text"][:])))
fin = dict(zip(ids, (x.decode() for x in f["finish_reason"][:])))
lengths = {i: len(t) for i, t in zip(ids, f["output_tokens"][:])}
assert "error" not in fin.values(), fin
for i in ("job-schema", "job-schema-sampled", "row-schema"):
    assert isinstance(json.loads(text[i]), dict), (i, text[i])
assert re.fullmatch(r"[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\.", text["row-regex"]), text["row-regex"]
assert text["row-choice"] in ("happy", "sad", "very tired"), text["row-choice"]
assert fin["job-schema-short"] == "length" and text["job-schema-short"].startswith("{"), fin
assert len(set(lengths.values())) >= 3, f"rows end at too few distinct steps: {lengths}"
print("uninterrupted:", {i: (fin[i], lengths[i]) for i in ids})
PY

# The row records' syncs: the first fdatasync is the header's, each later one a row's record.
mkdir "$WORK/trace"
KILL_PREFIX="$WORK/trace/out.h5" KILL_TRACE="$WORK/trace/changes" LD_PRELOAD="$WORK/kill_at_write.so" \
  "$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/trace/out.h5" >/dev/null 2>&1 || fail "the traced run failed"
mapfile -t row_syncs < <(awk '$2 == "fdatasync" {print $1}' "$WORK/trace/changes" | sed 1d)
[ "${#row_syncs[@]}" -ge 3 ] || fail "only ${#row_syncs[@]} row records synced: $(cat "$WORK/trace/changes")"
killed=()
for k in "${row_syncs[0]}" "${row_syncs[2]}"; do
  dir="$WORK/kill-$k"
  mkdir "$dir"
  rc=$(run_killed_at $((k + 1)) "$dir/out.h5" "$WORK/job.yaml" --set output.path="$dir/out.h5")
  [ "$rc" = 137 ] || fail "the run to kill after change $k exited $rc, not by the kill"
  done_rows=$("$TPBATCH" inspect "$dir/out.h5" | sed -n 's/^rows *\([0-9]*\) \/.*/\1/p')
  [ "${done_rows:-0}" -ge 1 ] && [ "$done_rows" -lt 6 ] || fail "killed after change $k, the file holds $done_rows rows, want 1..5"
  timeout 120 "$TPBATCH" "$WORK/job.yaml" --set output.path="$dir/out.h5" 2>"$dir/resume.log" ||
    fail "resume after the kill at change $k failed: $(tail -2 "$dir/resume.log")"
  echo "killed after change $k with $done_rows of 6 rows done; resumed"
  killed+=("$dir/out.h5")
done
results_equal "$WORK/ref.h5" "${killed[@]}" || fail "a resumed file differs from the uninterrupted run"
echo "${#killed[@]} kills mid-run, every resumed file equals the uninterrupted run"
