#!/usr/bin/env bash
# output.path naming a file the job reads -- the input, the job file, a model file, the chat
# template, also through a symbolic link, a hard link, or as the journal beside the output -- with
# if_exists: overwrite: exit 2 before any model is loaded, naming both paths, and every file the
# job reads is byte for byte as before.
source "$(dirname "$0")/lib.sh"
cp -r "$STORIES" "$WORK/model"
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' >"$WORK/in.jsonl"
echo '{{ messages[0].content }}' >"$WORK/template.jinja"
write_job "$WORK/job.yaml" "$WORK/model" "$WORK/in.jsonl" "$WORK/out.h5" "chat_template: $WORK/template.jinja" \
  "sampling:" "  max_new_tokens: 2"
ln -s "$WORK/in.jsonl" "$WORK/link-to-input.h5"
ln "$WORK/in.jsonl" "$WORK/hard-link-to-input.h5"
cp "$WORK/in.jsonl" "$WORK/x.h5.journal"

sums() { md5sum "$WORK"/in.jsonl "$WORK"/job.yaml "$WORK"/template.jinja "$WORK"/model/* "$WORK"/x.h5.journal; }
sums >"$WORK/before"
check() {  # OUTPUT WHAT-IT-IS [JOB-FILE]
  local out=$1 what=$2 job=${3:-$WORK/job.yaml} rc
  set +e
  "$TPBATCH" "$job" --set output.path="$out" --set output.if_exists=overwrite >/dev/null 2>"$WORK/log"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "output.path $out ($what): exit $rc, want 2: $(tail -2 "$WORK/log")"
  grep -q "output.path '$out'" "$WORK/log" && grep -q "$what" "$WORK/log" ||
    fail "output.path $out: the message does not name both: $(tail -1 "$WORK/log")"
  grep -q "weights:" "$WORK/log" && fail "output.path $out: the model was loaded before the refusal"
  sums | diff - "$WORK/before" >/dev/null || fail "output.path $out ($what): a file the job reads changed"
  echo "refused: $(grep -m1 error "$WORK/log" | cut -c1-170)"
}
check "$WORK/in.jsonl" "the input file (input.path) '$WORK/in.jsonl'"
check "$WORK/job.yaml" "the job file '$WORK/job.yaml'"
check "$WORK/model/model.safetensors" "a file of the model folder"
check "$WORK/model/config.json" "a file of the model folder"
check "$WORK/template.jinja" "the chat template"
check "$WORK/link-to-input.h5" "the input file"
check "$WORK/hard-link-to-input.h5" "the input file"
check "$WORK/x.h5" "would write its journal '$WORK/x.h5.journal', which is the input file" \
  "$(sed "s|$WORK/in.jsonl|$WORK/x.h5.journal|" "$WORK/job.yaml" >"$WORK/job2.yaml"; echo "$WORK/job2.yaml")"
