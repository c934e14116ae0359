#!/usr/bin/env bash
# Resume compares what changes results and nothing else. Refused (exit 2, naming it, the file
# untouched): the chat template file edited since the file was started (its content is
# fingerprinted like the model), chat_template_kwargs, engine.kv_cache_dtype,
# engine.kv_cache_tokens. Accepted: the same job again, the model folder spelled differently (a
# trailing '/', a relative path). A refusal's hint never offers overwrite (which discards every
# done row) as the way out.
source "$(dirname "$0")/lib.sh"
cp -r "$STORIES" "$WORK/model"
printf '%s\n' '{"id": "a", "messages": [{"role": "user", "content": "Once upon a time"}]}' >"$WORK/in.jsonl"
echo '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}' >"$WORK/template.jinja"
write_job "$WORK/job.yaml" "$WORK/model" "$WORK/in.jsonl" "$WORK/out.h5" "chat_template: $WORK/template.jinja" \
  "sampling:" "  max_new_tokens: 3" "engine:" "  kv_cache_dtype: float32" "  kv_cache_tokens: 4096"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "the first run failed: $(tail -2 "$WORK/log")"
cp "$WORK/out.h5" "$WORK/orig.h5"

resume() { "$TPBATCH" "$WORK/job.yaml" --set output.if_exists=resume "$@" >/dev/null 2>"$WORK/log"; }
refused() {  # WHAT PATTERN ARGS...
  local what=$1 pattern=$2 rc
  shift 2
  set +e
  resume "$@"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$what: resume exited $rc, want 2"
  grep -q "cannot be resumed: .*$pattern" "$WORK/log" || fail "$what: the refusal does not name it: $(cat "$WORK/log")"
  grep -q "rerun with what the file was written with" "$WORK/log" || fail "$what: no safe hint: $(cat "$WORK/log")"
  cmp -s "$WORK/out.h5" "$WORK/orig.h5" || fail "$what: the refused resume changed the file"
  echo "$what: refused: $(grep -o 'cannot be resumed: [^(]*' "$WORK/log" | cut -c1-140)"
}
resume || fail "resuming the same job failed: $(tail -2 "$WORK/log")"
cp "$WORK/out.h5" "$WORK/orig.h5"
resume --set model="$WORK/model/" || fail "the model folder with a trailing / was refused: $(tail -1 "$WORK/log")"
cp "$WORK/out.h5" "$WORK/relative.h5"  # a copy: the file records the model as this run spells it
(cd "$WORK" && "$TPBATCH" job.yaml --set model=model --set output.path=relative.h5 --set output.if_exists=resume \
  >/dev/null 2>"$WORK/log") || fail "the model folder as a relative path was refused: $(tail -1 "$WORK/log")"
cp "$WORK/out.h5" "$WORK/orig.h5"
refused "engine.kv_cache_dtype" "'engine.kv_cache_dtype' is float32 there and bfloat16 here" \
  --set engine.kv_cache_dtype=bfloat16
refused "engine.kv_cache_tokens" "'engine.kv_cache_tokens' is 4096 there and 64 here" --set engine.kv_cache_tokens=64
refused "chat_template_kwargs" "'chat_template_kwargs' is {\"enable_thinking\":false} here and absent there" \
  --set 'chat_template_kwargs={enable_thinking: false}'
echo '{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}' >"$WORK/template.jinja"
refused "chat template edited" "the chat template changed since the file was started"
