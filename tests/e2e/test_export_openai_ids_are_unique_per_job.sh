#!/usr/bin/env bash
# export --format openai builds its ids (id, request_id, the body's id) from the results file's
# job_id and the line: two jobs' exports share no id, and a resumed job keeps its ids.
source "$(dirname "$0")/lib.sh"
printf '%s\n' '{"id": "a", "prompt": "Once upon a time"}' '{"id": "b", "prompt": "The little dog"}' >"$WORK/in.jsonl"
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/one.h5" "sampling:" "  max_new_tokens: 2"
"$TPBATCH" "$WORK/job.yaml" 2>/dev/null || fail "job one failed"
"$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/two.h5" 2>/dev/null || fail "job two failed"
"$TPBATCH" export "$WORK/one.h5" --format openai -o "$WORK/one.jsonl" 2>/dev/null || fail "export one failed"
"$TPBATCH" export "$WORK/two.h5" --format openai -o "$WORK/two.jsonl" 2>/dev/null || fail "export two failed"
"$TPBATCH" "$WORK/job.yaml" --set output.if_exists=resume 2>/dev/null || fail "the resume of job one failed"
"$TPBATCH" export "$WORK/one.h5" --format openai -o "$WORK/one-resumed.jsonl" 2>/dev/null || fail "export failed"
$PY - "$WORK/one.jsonl" "$WORK/two.jsonl" "$WORK/one-resumed.jsonl" "$WORK/one.h5" <<'PY'
import json, sys, h5py
def ids(path):
    out = []
    for l in open(path):
        j = json.loads(l)
        out += [j["id"], j["response"]["request_id"], j["response"]["body"]["id"]]
    return out
one, two, resumed = ids(sys.argv[1]), ids(sys.argv[2]), ids(sys.argv[3])
job_id = h5py.File(sys.argv[4], "r").attrs["job_id"]
job_id = job_id.decode() if isinstance(job_id, bytes) else str(job_id)
assert len(job_id) == 32, job_id
assert all(job_id in i for i in one), (job_id, one)
assert len(set(one)) == len(one), one
assert not set(one) & set(two), set(one) & set(two)
assert resumed == one, (one, resumed)
print("job one:", one[:3], "job two:", two[:3])
PY
