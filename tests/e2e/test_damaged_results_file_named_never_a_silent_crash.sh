#!/usr/bin/env bash
# inspect and export on a damaged results file -- global heap object sizes overwritten, and 12
# seeded random 3-byte corruptions -- end with a message naming the file: an error (exit 1 or 2), or,
# when libhdf5 itself crashes on the damage, the fatal-signal message "fatal signal N (...) while
# reading results file '<file>'". Never a bare SIGSEGV with no word, never a hang. That message is
# also checked on its own: a SIGSEGV raised while inspect and export read the file (kill_at_write.c
# at their third read), as a crash inside libhdf5 would be.
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
build_kill_at_write
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' '{"id": "b", "prompt": "The little dog"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/good.h5" "sampling:" "  max_new_tokens: 4"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "the run failed"
$PY - "$WORK/good.h5" "$WORK/damaged" <<'PY'
import os, random, sys
good = open(sys.argv[1], "rb").read()
os.makedirs(sys.argv[2])
def save(name, data):
    open(os.path.join(sys.argv[2], name + ".h5"), "wb").write(data)
# Global heap collections ("GCOL"): each object's header holds its size (8 bytes at +8 of the object).
at = good.find(b"GCOL")
heaps = 0
while at >= 0 and heaps < 4:
    for k, junk in enumerate([b"\xff" * 8, b"\x00\x00\x00\x00\x00\x00\x00\x7f", b"\x10" * 8]):
        d = bytearray(good)
        d[at + 16 + 8:at + 16 + 16] = junk   # the first object's size
        save(f"heap{heaps}-{k}", bytes(d))
    heaps += 1
    at = good.find(b"GCOL", at + 4)
assert heaps, "no global heap in the file"
rng = random.Random(20240611)
for t in range(12):
    d = bytearray(good)
    pos = rng.randrange(0, len(good) - 3)
    d[pos:pos + 3] = bytes(rng.randrange(256) for _ in range(3))
    save(f"random{t}", bytes(d))
PY
crashes=0 errors=0 fine=0
for f in "$WORK"/damaged/*.h5; do
  for cmd in "inspect $f" "export $f --format jsonl"; do
    set +e
    timeout 30 "$TPBATCH" $cmd >/dev/null 2>"$WORK/err"
    rc=$?
    set -e
    [ "$rc" != 124 ] || fail "tpbatch $cmd hung"
    if [ "$rc" -gt 128 ]; then
      grep -q "fatal signal $((rc - 128)) (.*) while reading results file '$f'" "$WORK/err" ||
        fail "tpbatch $cmd died by signal $((rc - 128)) without naming the file: $(cat "$WORK/err")"
      crashes=$((crashes + 1))
    elif [ "$rc" != 0 ]; then
      grep -q "$f" "$WORK/err" || fail "tpbatch $cmd exited $rc without naming the file: $(cat "$WORK/err")"
      errors=$((errors + 1))
    else
      fine=$((fine + 1))
    fi
  done
done
echo "damaged files: $errors errors naming the file, $crashes crashes naming it, $fine reads that worked"

for cmd in "inspect $WORK/good.h5" "export $WORK/good.h5 --format jsonl"; do
  set +e
  KILL_READS=1 KILL_SIGNAL=11 KILL_AT=3 KILL_PREFIX="$WORK/good.h5" LD_PRELOAD="$WORK/kill_at_write.so" \
    timeout 30 "$TPBATCH" $cmd >/dev/null 2>"$WORK/err"
  rc=$?
  set -e
  [ "$rc" = 139 ] || fail "tpbatch $cmd with a SIGSEGV at its third read exited $rc"
  grep -q "fatal signal 11 (SIGSEGV) while reading results file '$WORK/good.h5'" "$WORK/err" ||
    fail "tpbatch $cmd: the crash does not name the file: $(cat "$WORK/err")"
done
echo "a crash while reading names the file: $(cat "$WORK/err")"
