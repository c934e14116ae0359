#!/usr/bin/env bash
# Sizes meant as "no limit" never wrap into a tiny KV cache that silently cuts rows: with
# engine.max_seqs or engine.kv_cache_tokens = 2^63-1, or a model whose max_position_embeddings is
# 2^57, the KV cache is sized by memory (a warning names engine.kv_cache_tokens when it asked for
# more) and every row gets all its max_new_tokens. Engine values the backend cannot take
# (engine.block_size 257 or 2^62, engine.threads 2^31) exit 2 naming the key and its limit, before
# the output is touched or the model loaded.
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
$PY -c "
import json
for i in range(4): print(json.dumps({'id': f'r{i}', 'prompt': 'Once upon a time ' * (i + 1)}))" >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 40" "  ignore_eos: true"
cp -r "$STORIES" "$WORK/long-context"
patch_json "$WORK/long-context/config.json" "c['max_position_embeddings'] = 2**57"
big=9223372036854775807

every_row_whole() {  # WHAT ARGS...
  local what=$1
  shift
  "$TPBATCH" "$WORK/job.yaml" "$@" 2>"$WORK/log" || fail "$what: exit $?: $(tail -2 "$WORK/log")"
  $PY - "$WORK/out.h5" "$what" <<'PY' || fail "$what: rows were cut: $(grep 'KV cache' "$WORK/log")"
import sys, h5py
lens = [len(t) for t in h5py.File(sys.argv[1], "r")["output_tokens"][:]]
assert lens == [40] * 4, lens
PY
  echo "$what: $(grep -m1 'KV cache:' "$WORK/log" | cut -c1-80)"
}
every_row_whole "engine.max_seqs 2^63-1" --set engine.max_seqs=$big
every_row_whole "engine.kv_cache_tokens 2^63-1" --set engine.kv_cache_tokens=$big
grep -q "warning: engine.kv_cache_tokens $big is more than memory holds" "$WORK/log" ||
  fail "no warning names engine.kv_cache_tokens: $(grep -m1 warning "$WORK/log")"
every_row_whole "max_position_embeddings 2^57" --set model="$WORK/long-context"

echo keep >"$WORK/existing.h5"
for bad in engine.block_size=257 engine.block_size=4611686018427387904 engine.threads=2147483648; do
  set +e
  "$TPBATCH" "$WORK/job.yaml" --set "$bad" --set output.path="$WORK/existing.h5" 2>"$WORK/log"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$bad: exit $rc, want 2"
  grep -q "'${bad%%=*}' must be an integer in \[[0-9]*, [0-9]*\]" "$WORK/log" || fail "$bad: $(cat "$WORK/log")"
  [ "$(cat "$WORK/existing.h5")" = keep ] || fail "$bad: the existing output was touched"
  echo "$bad: $(grep error "$WORK/log")"
done
