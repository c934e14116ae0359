#!/usr/bin/env bash
# output.if_exists: overwrite replaces a finished job's file only once the new job records its
# first row: a job that fails a start-up check (a model folder without tokenizer.json, a
# chat_template that does not parse, a layout the ranks cannot form, weights with a NaN) exits
# non-zero naming what is wrong and leaves the old file byte for byte, with nothing beside it.
source "$(dirname "$0")/lib.sh"
for i in 1 2 3 4 5; do echo "{\"id\": \"r$i\", \"prompt\": \"Once upon a time $i\"}"; done >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" "sampling:" "  max_new_tokens: 4"
"$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || { cat "$WORK/log"; fail "the first run failed"; }
"$TPBATCH" inspect "$WORK/out.h5" | grep -q "rows *5 / 5 done" || fail "the first run did not finish its 5 rows"
cp "$WORK/out.h5" "$WORK/good.h5"

# refused WHAT EXPECTED-MESSAGE --set ...: the run fails naming it; out.h5 is the good file.
refused() {
  local what=$1 want=$2 rc
  shift 2
  set +e
  "$TPBATCH" "$WORK/job.yaml" "$@" >/dev/null 2>"$WORK/log"
  rc=$?
  set -e
  [ "$rc" != 0 ] || fail "$what: the run exited 0"
  grep -q -- "$want" "$WORK/log" || fail "$what: the error does not say '$want': $(cat "$WORK/log")"
  cmp -s "$WORK/good.h5" "$WORK/out.h5" || fail "$what: the finished file was changed: $("$TPBATCH" inspect "$WORK/out.h5" | grep rows)"
  for side in journal partial; do [ ! -e "$WORK/out.h5.$side" ] || fail "$what: out.h5.$side left beside it"; done
  echo "$what: exit $rc, $(grep -m1 'error' "$WORK/log" | cut -c1-160)"
}

mkdir "$WORK/no-tokenizer"
cp "$STORIES"/{config.json,model.safetensors,tokenizer_config.json} "$WORK/no-tokenizer/"
refused "model folder without tokenizer.json" "no-tokenizer/tokenizer.json' not found" --set model="$WORK/no-tokenizer"

echo '{% for m in messages %}{{ m.content }' >"$WORK/bad.jinja"
refused "chat template that does not parse" "chat_template: $WORK/bad.jinja" --set chat_template="$WORK/bad.jinja"

refused "tensor parallelism one rank cannot form" "tensor" --set parallel.tensor=2

# A weight that is NaN: found by the checkpoint scan after the device is chosen, still before any row.
mkdir "$WORK/nan-model"
cp "$STORIES"/*.json "$WORK/nan-model/"
$PY - "$STORIES/model.safetensors" "$WORK/nan-model/model.safetensors" <<'PY'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
t = header["model.norm.weight"]
assert t["dtype"] == "F32", t
struct.pack_into("<f", data, 8 + n + t["data_offsets"][0], float("nan"))
open(sys.argv[2], "wb").write(data)
PY
refused "a NaN weight" "model.norm.weight" --set model="$WORK/nan-model"
