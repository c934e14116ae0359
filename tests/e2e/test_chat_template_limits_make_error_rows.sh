#!/usr/bin/env bash
# A chat template that would take unbounded memory or time -- range(10**9), "ab" * 10**11, a string
# doubled in a loop, nested loops of 10**10 iterations -- makes an error row naming the template
# limit (range as jinja2's sandbox bounds it, 16 MiB strings, 1,000,000 loop iterations) for the
# row that triggers it; the other rows are done and the job exits 0. It used to end the whole job
# with a bare std::bad_alloc.
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
cat >"$WORK/template.jinja" <<'JINJA'
{%- set c = messages[0].content -%}
{%- if c == "range" -%}{% for i in range(10**9) %}x{% endfor %}
{%- elif c == "repeat" -%}{{ "ab" * 10**11 }}
{%- elif c == "double" -%}{% set ns = namespace(s="ab") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}
{%- elif c == "loops" -%}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}
{%- else -%}{{ c }}{%- endif -%}
JINJA
for c in "Once upon a time" range repeat double loops "The little dog"; do
  printf '{"messages": [{"role": "user", "content": "%s"}]}\n' "$c"
done >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "chat_template: $WORK/template.jinja" \
  "sampling:" "  max_new_tokens: 2"
timeout 120 "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || fail "the job exited $?: $(tail -3 "$WORK/log")"
$PY - "$WORK/out.h5" <<'PY' || fail "the rows are not as expected"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
fin = [x.decode() for x in f["finish_reason"][:]]
err = [x.decode() for x in f["error"][:]]
assert fin[0] != "error" and fin[5] != "error", err
want = {1: "range() of 1000000000 items is over the template limit of 100000",
        2: "over the template limit of 16777216 bytes",
        3: "over the template limit of 16777216 bytes",
        4: "more than 1000000 loop iterations, the template limit"}
for i, text in want.items():
    assert fin[i] == "error" and text in err[i], (i, err[i])
    print("row", i, ":", err[i][:150])
PY
