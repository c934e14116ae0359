#!/usr/bin/env bash
# Impossible layouts exit 2 on every rank within seconds, naming heads or the world size, before
# any weights are read (the model folder's weights are not even needed).
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
echo '{"prompt": "hi"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5"
check() {
  local np=$1 tensor=$2 pattern=$3
  set +e
  out=$(timeout 60 mpirun -np "$np" --oversubscribe "$TPBATCH" "$WORK/job.yaml" --set parallel.tensor="$tensor" 2>&1)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "np $np tensor $tensor: exit $rc, want 2: $out"
  echo "$out" | grep -q "$pattern" || fail "np $np tensor $tensor: message lacks '$pattern': $out"
  [ "$(echo "$out" | grep -c 'tpbatch: error')" = 1 ] || fail "error not reported exactly once: $out"
  [ ! -e "$WORK/out.h5" ] || fail "results file created for an impossible layout"
}
check 3 3 "attention heads"
check 3 2 "world size 3"
check 16 16 "attention heads"
echo "impossible layouts refused"
