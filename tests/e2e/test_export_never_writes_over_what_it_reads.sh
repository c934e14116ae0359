#!/usr/bin/env bash
# `tpbatch export R.h5 --output X` where X is R.h5 itself (also through a link), the job's input, or
# the --input file: exit 2 naming it, and R.h5 and the input are byte for byte as before; a later
# export of the same file still works. `--output -` writes to standard output, not a file named '-'.
source "$(dirname "$0")/lib.sh"
printf '%s\n' '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Once upon"}}' \
  >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5" "sampling:" "  max_new_tokens: 2"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the run failed"
cp "$WORK/in.jsonl" "$WORK/other.jsonl"
ln -s "$WORK/r.h5" "$WORK/link.h5"
sums() { md5sum "$WORK/r.h5" "$WORK/in.jsonl" "$WORK/other.jsonl"; }
sums >"$WORK/before"
for format in jsonl openai; do
  for target in "$WORK/r.h5" "$WORK/link.h5" "$WORK/in.jsonl" "other:$WORK/other.jsonl"; do
    extra=()
    case $target in other:*) target=${target#other:}; extra=(--input "$target") ;; esac
    set +e
    "$TPBATCH" export "$WORK/r.h5" --format "$format" --output "$target" "${extra[@]}" >/dev/null 2>"$WORK/log"
    rc=$?
    set -e
    [ "$rc" = 2 ] || fail "export --format $format --output $target: exit $rc, want 2: $(cat "$WORK/log")"
    grep -q "'$target'" "$WORK/log" || fail "the refusal does not name $target: $(cat "$WORK/log")"
    sums | diff - "$WORK/before" >/dev/null || fail "export --output $target changed a file it reads"
  done
done
echo "refused: $(cat "$WORK/log")"
(cd "$WORK" && "$TPBATCH" export r.h5 --format jsonl --output - >"$WORK/stdout.jsonl") || fail "export --output - failed"
[ ! -e "$WORK/-" ] || fail "export --output - wrote a file named '-'"
grep -q '"id":"a"' "$WORK/stdout.jsonl" || fail "export --output - printed nothing useful: $(head -c 200 "$WORK/stdout.jsonl")"
