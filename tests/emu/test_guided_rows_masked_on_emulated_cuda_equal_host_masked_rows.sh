#!/usr/bin/env bash
# Constrained rows with `device: cuda` on the emulated device: a job-level JSON Schema and rows
# carrying their own regex, choice and schema, greedy at TP=1 and TP=2. Each rank masks its own
# vocabulary shard on the device (mask_logits): the tokens and logprobs equal those of the same
# run with top logprobs asked for, whose rows come to the host and are masked there, and every
# finished row's text matches its constraint, as on the CPU backend. (Tokens are not compared with
# the CPU run: a constraint often picks among tokens the model gives a few percent at most, where
# bf16 activations reorder near-equal logits.) A seeded sampled constrained row is drawn from its
# masked logits on the device exactly as the host's sampler draws it.
source "$(dirname "$0")/lib_emu.sh"

$PY - "$WORK/in.jsonl" <<'PY'
import json, sys
rows = [
    {"id": "job-schema", "prompt": "Once upon a time"},
    {"id": "job-schema-2", "prompt": "Lily and Ben"},
    {"id": "row-regex", "prompt": "The dog", "guided_regex": r"[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\."},
    {"id": "row-choice", "prompt": "The cat was", "guided_choice": ["happy", "sad", "very tired"]},
    {"id": "row-schema", "prompt": "Tom had", "guided_json": {"type": "object", "properties": {
        "toys": {"type": "array", "items": {"type": "string"}, "maxItems": 2}, "happy": {"type": "boolean"}},
        "required": ["toys", "happy"]}},
    {"id": "job-schema-3", "prompt": "One day"},
]
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 60" \
  "guided:" "  json: {type: object, properties: {name: {type: string}, age: {type: integer, minimum: 0}}, required: [name, age]}" \
  "  max_string_length: 8" "  max_items: 3"
on cpu 1 "$WORK/job.yaml" --set output.path="$WORK/cpu.h5"

# valid RESULTS.h5 WHAT: every row its constraint finished (finish_reason eos) matches it.
valid() {
  $PY - "$1" <<'PY' || fail "$2: a constrained row's text does not match its constraint"
import h5py, json, re, sys
f = h5py.File(sys.argv[1], "r")
ids = [x.decode() for x in f["id"][:]]
checked = 0
for i, rid in enumerate(ids):
    text = f["output_text"][i].decode()
    reason = f["finish_reason"][i].decode()
    assert f["error"][i].decode() == "", (rid, f["error"][i])
    if reason != "eos":
        continue
    if rid == "row-regex":
        assert re.fullmatch(r"[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\.", text), (rid, text)
    elif rid == "row-choice":
        assert text in ("happy", "sad", "very tired"), (rid, text)
    elif rid == "row-schema":
        v = json.loads(text)
        assert set(v) == {"toys", "happy"} and isinstance(v["happy"], bool) and len(v["toys"]) <= 2, (rid, text)
    else:
        v = json.loads(text)
        assert isinstance(v["name"], str) and isinstance(v["age"], int) and v["age"] >= 0, (rid, text)
    checked += 1
assert checked >= 4, f"only {checked} rows finished by their constraint"
print(f"{checked} rows finished inside their constraint")
PY
}
valid "$WORK/cpu.h5" "cpu"

for tp in 1 2; do
  on cuda "$tp" "$WORK/job.yaml" --set output.path="$WORK/device-$tp.h5" --set parallel.tensor="$tp"
  on cuda "$tp" "$WORK/job.yaml" --set output.path="$WORK/host-$tp.h5" --set parallel.tensor="$tp" \
    --set sampling.top_logprobs=2
  identical "$WORK/device-$tp.h5" "$WORK/host-$tp.h5" "TP=$tp: rows masked on the device and on the host"
  valid "$WORK/device-$tp.h5" "cuda TP=$tp"
done

# Sampled: the masked rows are drawn on the device (only tokens come back); with top logprobs
# their logits come to the host, whose sampler draws them: the same tokens and logprobs.
sampled=(--set sampling.temperature=0.9 --set sampling.top_k=20 --set sampling.seed=11)
on cuda 1 "$WORK/job.yaml" --set output.path="$WORK/s-device.h5" "${sampled[@]}"
on cuda 1 "$WORK/job.yaml" --set output.path="$WORK/s-host.h5" "${sampled[@]}" --set sampling.top_logprobs=1
identical "$WORK/s-device.h5" "$WORK/s-host.h5" "sampled constrained rows drawn on the device and on the host"
valid "$WORK/s-device.h5" "cuda sampled"
echo PASS
