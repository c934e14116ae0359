#!/usr/bin/env bash
# Chat templates: tpbatch's renderer (src/chat/) gives byte-identical output to Python's jinja2
# (Debian python3-jinja2, set up as Hugging Face's apply_chat_template does) on the real
# templates in tests/data/chat_templates/, for several message lists, with the generation prompt
# on and off; where jinja2's rendering raises (raise_exception), tpbatch must fail too.
source "$(dirname "$0")/lib.sh"
if ! "$PY" -c "import jinja2" 2>/dev/null; then
  echo "SKIP: python3-jinja2 is not installed (apt-get install python3-jinja2)"
  exit 77
fi
DATA="$HERE/../data/chat_templates"
"$PY" "$HERE/chat_template_reference.py" "$DATA" "$HERE/chat_messages.json" "$WORK" >"$WORK/cases.txt"
n=0 raised=0
n_kwargs=0
while IFS=$'\x1f' read -r name case gen bos eos variant kwargs; do
  stem="$WORK/${name}__${case}__${gen}${variant:+__$variant}"
  flags=()
  [ "$gen" = 0 ] && flags+=(--no-generation-prompt)
  if [ -n "$variant" ]; then
    flags+=(--chat-template-kwargs "$kwargs")
    n_kwargs=$((n_kwargs + 1))
  fi
  set +e
  "$TPBATCH" render-chat --template "$DATA/$name.jinja" --messages "$WORK/$case.json" \
    --bos-token "$bos" --eos-token "$eos" "${flags[@]}" >"$stem.got" 2>"$stem.err"
  rc=$?
  set -e
  if [ -f "$stem.raise" ]; then
    [ "$rc" != 0 ] || fail "$name / $case (generation prompt $gen): jinja2 raised '$(cat "$stem.raise")' but tpbatch rendered: $(head -c 300 "$stem.got")"
    grep -qF "$(cat "$stem.raise")" "$stem.err" || fail "$name / $case: tpbatch failed differently: $(cat "$stem.err")"
    raised=$((raised + 1))
  else
    [ "$rc" = 0 ] || fail "$name / $case (generation prompt $gen): tpbatch failed: $(cat "$stem.err")"
    if ! cmp -s "$stem.txt" "$stem.got"; then
      echo "--- jinja2"; cat -A "$stem.txt" | head -40
      echo "--- tpbatch"; cat -A "$stem.got" | head -40
      fail "$name / $case (generation prompt $gen): renderings differ"
    fi
  fi
  n=$((n + 1))
done <"$WORK/cases.txt"
templates=$(ls "$DATA"/*.jinja | wc -l)
cases=$("$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$HERE/chat_messages.json")
[ "$cases" -ge 11 ] || fail "only $cases message lists in chat_messages.json"
[ "$n" -ge $((templates * cases * 2)) ] || fail "only $n renderings compared"
[ "$n_kwargs" -ge $((2 * cases * 2)) ] || fail "only $n_kwargs renderings with chat_template_kwargs compared"
echo "PASS: $n renderings of $templates templates byte-identical to jinja2 ($raised raised in both, $n_kwargs with chat_template_kwargs)"
