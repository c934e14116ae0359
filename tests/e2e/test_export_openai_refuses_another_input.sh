#!/usr/bin/env bash
# export --format openai labels each output line from its input line (chat or completion, the
# model): after the input was edited, or with --input naming another file, it exits 2 naming the
# input (the results file keeps the input's fingerprint) instead of labelling rows from other lines.
source "$(dirname "$0")/lib.sh"
req() { printf '{"custom_id": "%s", "method": "POST", "url": "%s", "body": {"model": "%s", %s}}\n' "$@"; }
{
  req a /v1/completions m-a '"prompt": "Once upon a time"'
  req b /v1/chat/completions m-b '"messages": [{"role": "user", "content": "The little dog"}]'
} >"$WORK/in.jsonl"
echo '{% for m in messages %}{{ m.content }}{% endfor %}' >"$WORK/template.jinja"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/r.h5" "chat_template: $WORK/template.jinja" \
  "sampling:" "  max_new_tokens: 2"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the run failed"
"$TPBATCH" export "$WORK/r.h5" --format openai --output "$WORK/ok.jsonl" || fail "export of the unchanged input failed"
grep -q '"chat.completion"' "$WORK/ok.jsonl" || fail "export lost the chat row's kind"

refused() {  # WHAT ARGS...
  local what=$1 rc
  shift
  set +e
  "$TPBATCH" export "$WORK/r.h5" --format openai "$@" >"$WORK/out.jsonl" 2>"$WORK/log"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$what: export exited $rc, want 2: $(head -c 300 "$WORK/out.jsonl")"
  grep -q "is not the one '$WORK/r.h5' was computed from" "$WORK/log" || fail "$what: $(cat "$WORK/log")"
  echo "$what: $(cut -c1-150 "$WORK/log")"
}
{
  req b /v1/chat/completions m-b '"messages": [{"role": "user", "content": "The little dog"}]'
  req a /v1/completions m-a '"prompt": "Once upon a time"'
} >"$WORK/other.jsonl"
refused "--input another file" --input "$WORK/other.jsonl"
cp "$WORK/other.jsonl" "$WORK/in.jsonl"
refused "the input edited since the run"
