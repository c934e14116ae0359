#!/usr/bin/env bash
# Constrained generation (guided.* / guided_* / response_format) on the real stories260K model:
# every row of tests/data/guided_schemas/ (real-world schemas) either validates with Python's
# jsonschema or is an error row naming the unsupported keyword; regex rows re.fullmatch their
# regex, choice rows are one of the choices, greedy and sampled; TP=2, PP=2 and DP=2 (one row at
# a time) give the same tokens as TP=1 (each TP rank masks its own vocabulary shard). Edges: a regex
# that admits only the empty string ends at EOS ("stop"), a dead end is an error row naming the
# position, max_new_tokens hit mid-object finishes "length", a stop string inside the constrained
# text ends the row there (vLLM's behaviour), a grammar is an error row naming guided_grammar; a
# job-level constraint that does not compile exits 2 naming its key.
# Then the masks: at every step of every constrained row the TP=1 run generated, the engine's
# allowed tokens equal llguidance's (tests/guided/compare_masks_with_llguidance.py), on the
# model's vocabulary and, walking the same outputs' text, on Llama-2's (32,000 tokens) and GPT-2's
# (50,257). Without llguidance (scripts/setup.sh installs it) the test reports skipped once the
# rest has passed.
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
$PY -c "import jsonschema, h5py" 2>/dev/null || { echo "SKIP: $PY lacks jsonschema or h5py"; exit 77; }
SCHEMAS="$HERE/../data/guided_schemas"
$PY - "$SCHEMAS" "$WORK/in.jsonl" <<'PY'
import json, os, sys
folder, out = sys.argv[1], sys.argv[2]
prompts = ["Once upon a time", "Lily and Ben", "The dog"]
rows = []
for i, name in enumerate(sorted(n for n in os.listdir(folder) if n.endswith(".json"))):
    schema = json.load(open(os.path.join(folder, name)))
    rows.append({"id": "schema:" + name, "prompt": prompts[i % 3], "guided_json": schema})
for i, rx in enumerate([r"[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\.", r"\d{3}-\d{4}", r"(yes|no|maybe)!?", r"[a-z ]{5,20}"]):
    rows.append({"id": f"regex:{i}", "prompt": prompts[i % 3], "guided_regex": rx})
rows.append({"id": "choice:0", "prompt": "The cat was", "guided_choice": ["happy", "sad", "very tired"]})
rows.append({"id": "object:0", "prompt": "Once upon a time", "guided_json_object": True})
rows.append({"custom_id": "openai:schema", "method": "POST", "url": "/v1/completions",
             "body": {"prompt": "Tom had", "response_format": {"type": "json_schema", "json_schema": {"name": "x",
                      "schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}}}}}})
rows.append({"custom_id": "openai:object", "method": "POST", "url": "/v1/completions",
             "body": {"prompt": "Tom had", "response_format": {"type": "json_object"}}})
rows.append({"id": "edge:eos_only", "prompt": "Once", "guided_regex": "(?:)"})
rows.append({"id": "edge:dead_end", "prompt": "Once", "guided_regex": "ab", "min_tokens": 5})
rows.append({"id": "edge:length", "prompt": "Once", "guided_json": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, "max_new_tokens": 3})
# oneOf: branches told apart by a required const (each output matches exactly one); branches that
# share an output ({} here) are an error row naming oneOf and the output.
pet = lambda kind, extra: {"type": "object", "properties": {"kind": {"const": kind}, extra: {"type": "integer"}}, "required": ["kind"]}
rows.append({"id": "oneof:pets", "prompt": "The dog", "guided_json": {"oneOf": [pet("cat", "lives"), pet("dog", "age")]}})
rows.append({"id": "edge:oneof_overlap", "prompt": "Once", "guided_json": {"oneOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}]}})
rows.append({"id": "edge:grammar", "prompt": "Once", "guided_grammar": "root ::= \"a\""})
rows.append({"id": "edge:stop", "prompt": "The cat was", "guided_choice": ["happy end", "sad end"], "stop": [" end"]})
rows.append({"id": "free", "prompt": "Once upon a time"})
# Sampled constrained rows: drawn on the backend from the masked logits (the last one's penalty
# keeps it on the host path); the same tokens at every layout all the same.
rows.append({"id": "sampled:schema", "prompt": "Tom had", "temperature": 0.9, "seed": 3,
             "guided_json": {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name", "n"]}})
rows.append({"id": "sampled:regex", "prompt": "The dog", "temperature": 1.0, "top_p": 0.9, "guided_regex": r"[a-z]{3,6}( [a-z]{2,6}){1,3}"})
rows.append({"id": "sampled:choice", "prompt": "The cat was", "temperature": 1.5, "guided_choice": ["happy", "sad", "very tired"]})
rows.append({"id": "sampled:penalized", "prompt": "Lily and Ben", "temperature": 0.8, "repetition_penalty": 1.3,
             "guided_regex": r"[a-z]{3,6}( [a-z]{2,6}){1,3}"})
with open(out, "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
# A job-level constraint that does not compile ends the job before any weights load: exit 2 naming the key.
expect_exit_2() {  # expect_exit_2 TEXT [--set ...]
  local want=$1 rc=0
  shift
  write_job "$WORK/bad.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/bad.h5"
  "$TPBATCH" "$WORK/bad.yaml" "$@" 2>"$WORK/bad.log" || rc=$?
  [ "$rc" = 2 ] || { cat "$WORK/bad.log"; fail "exit $rc, not 2, for $*"; }
  grep -qF "$want" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "no '$want' in the error for $*"; }
  ! grep -q "weights:" "$WORK/bad.log" || fail "weights loaded before the constraint was checked ($*)"
}
expect_exit_2 "'guided.json': JSON Schema keyword 'not' at #/properties/a is not supported" \
  --set 'guided.json={type: object, properties: {a: {not: {type: string}}}}'
expect_exit_2 "'guided.regex': regex '(a': a '(' without its ')'" --set 'guided.regex=(a'
expect_exit_2 "'guided.grammar': grammars are not supported" --set 'guided.grammar=root ::= "a"'
expect_exit_2 "'guided': set one of" --set 'guided.regex=a' --set 'guided.choice=[a, b]'
write_job "$WORK/job.yaml" "$STORIES" "$WORK/in.jsonl" "$WORK/tp1.h5" \
  "sampling:" "  max_new_tokens: 400" "  temperature: 0.0" \
  "guided:" "  max_string_length: 10" "  max_items: 3"
mpirun_tpbatch 1 "$WORK/job.yaml" 2>"$WORK/tp1.log" || { cat "$WORK/tp1.log"; fail "TP=1 run failed"; }
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/tp2.h5" --set parallel.tensor=2 2>"$WORK/tp2.log" ||
  { cat "$WORK/tp2.log"; fail "TP=2 run failed"; }
# PP=2: the masks travel with the step to the last stage, which holds the LM head.
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/pp2.h5" --set parallel.pipeline=2 2>"$WORK/pp2.log" ||
  { cat "$WORK/pp2.log"; fail "PP=2 run failed"; }
# Two replicas, one row at a time each: other batches, the same tokens (the matcher's state is the row's own).
mpirun_tpbatch 2 "$WORK/job.yaml" --set output.path="$WORK/dp2.h5" --set engine.max_seqs=1 2>"$WORK/dp2.log" ||
  { cat "$WORK/dp2.log"; fail "DP=2 run failed"; }
$PY - "$WORK" "$SCHEMAS" <<'PY' || fail "constrained outputs wrong"
import json, os, re, sys, h5py, jsonschema
w, folder = sys.argv[1], sys.argv[2]
pet = lambda kind, extra: {"type": "object", "properties": {"kind": {"const": kind}, extra: {"type": "integer"}}, "required": ["kind"]}
a, b = h5py.File(f"{w}/tp1.h5", "r"), h5py.File(f"{w}/tp2.h5", "r")
toks = lambda g: [list(map(int, t)) for t in g["output_tokens"][:]]
assert toks(a) == toks(b), "TP=2 generated other tokens than TP=1"
assert toks(a) == toks(h5py.File(f"{w}/pp2.h5", "r")), "PP=2 generated other tokens than TP=1"
assert toks(a) == toks(h5py.File(f"{w}/dp2.h5", "r")), "DP=2 with max_seqs 1 generated other tokens than TP=1"
ids = [x.decode() for x in a["id"][:]]
fin = [x.decode() for x in a["finish_reason"][:]]
err = [x.decode() for x in a["error"][:]]
text = [x.decode() for x in a["output_text"][:]]
rows = {i: (fin[k], err[k], text[k], toks(a)[k]) for k, i in enumerate(ids)}
valid, refused, bad = 0, {}, []
for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
    schema = json.load(open(os.path.join(folder, name)))
    f, e, t, _ = rows["schema:" + name]
    if f == "error":  # a keyword out of the subset, or oneOf branches that share an output
        m = re.search(r"JSON Schema keyword '([^']+)'|\b(oneOf) at #\S*: branches \d+ and \d+ (?:both admit|may both match)", e)
        if not m:
            bad.append((name, "error without a keyword", e))
            continue
        refused[m.group(1) or m.group(2)] = refused.get(m.group(1) or m.group(2), 0) + 1
        continue
    try:
        assert f in ("stop", "eos"), f"finish {f}"
        jsonschema.validate(json.loads(t), schema)
        valid += 1
    except Exception as ex:
        bad.append((name, f, str(ex)[:200], t[:200]))
for i, rx in enumerate([r"[A-Z][a-z]{2,8}( [a-z]{1,8}){2,5}\.", r"\d{3}-\d{4}", r"(yes|no|maybe)!?", r"[a-z ]{5,20}"]):
    f, e, t, _ = rows[f"regex:{i}"]
    if f not in ("stop", "eos") or not re.fullmatch(rx, t): bad.append((f"regex:{i}", f, t))
f, e, t, _ = rows["choice:0"]
if t not in ("happy", "sad", "very tired"): bad.append(("choice", f, t))
for k in ("object:0", "openai:object"):
    f, e, t, _ = rows[k]
    try:
        assert f in ("stop", "eos") and isinstance(json.loads(t), dict)
    except Exception: bad.append((k, f, t))
f, e, t, _ = rows["openai:schema"]
try:
    jsonschema.validate(json.loads(t), {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}})
except Exception as ex: bad.append(("openai:schema", f, t, str(ex)[:100]))
f, e, t, tk = rows["edge:eos_only"]
if not (f in ("stop", "eos") and t == "" and tk == [2]): bad.append(("eos_only", f, t, tk))
f, e, t, tk = rows["edge:dead_end"]
if not (f == "error" and "generated position" in e): bad.append(("dead_end", f, e, tk))
f, e, t, tk = rows["edge:length"]
if not (f == "length" and len(tk) == 3 and t.startswith("{")): bad.append(("length", f, t))
f, e, t, _ = rows["oneof:pets"]
try:
    jsonschema.validate(json.loads(t), {"oneOf": [pet("cat", "lives"), pet("dog", "age")]})
except Exception as ex: bad.append(("oneof:pets", f, t, str(ex)[:100]))
f, e, t, _ = rows["edge:oneof_overlap"]
if not (f == "error" and 'oneOf at #: branches 0 and 1 both admit "{}"' in e): bad.append(("oneof_overlap", f, e))
f, e, t, tk = rows["edge:grammar"]
if not (f == "error" and "guided_grammar" in e): bad.append(("grammar", f, e))
f, e, t, tk = rows["edge:stop"]
if not (f == "stop" and t in ("happy", "sad")): bad.append(("stop string", f, t))
if rows["free"][0] != "length": bad.append(("free", rows["free"][0]))
f, e, t, _ = rows["sampled:schema"]
try:
    jsonschema.validate(json.loads(t), {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name", "n"]})
except Exception as ex: bad.append(("sampled:schema", f, t, str(ex)[:100]))
for k in ("sampled:regex", "sampled:penalized"):
    f, e, t, _ = rows[k]
    if f not in ("stop", "eos") or not re.fullmatch(r"[a-z]{3,6}( [a-z]{2,6}){1,3}", t): bad.append((k, f, t))
f, e, t, _ = rows["sampled:choice"]
if t not in ("happy", "sad", "very tired"): bad.append(("sampled:choice", f, t))
total = len([n for n in os.listdir(folder) if n.endswith(".json")])
print(f"schemas: {total}, generated and valid: {valid}, refused: {sum(refused.values())} {refused}")
for x in bad: print("BAD", x)
assert not bad
assert valid >= total // 2, "fewer than half of the schemas are supported"
PY

# The mask comparison with llguidance, on the rows above.
REF_PY=${TPBATCH_REFERENCE_PY:-$HERE/../../.venv-reference/bin/python}
MASKS="$TPBATCH_BUILD_DIR/tests/tpbatch_guided_masks"
[ -x "$MASKS" ] || fail "$MASKS is not built"
if ! "$REF_PY" -c "import llguidance" 2>/dev/null; then
  echo "SKIP: everything above passed, but $REF_PY has no llguidance (scripts/setup.sh installs it): masks not compared"
  exit 77
fi
$PY - "$WORK" <<'PY' || fail "could not write the mask comparison's cases"
import json, sys, h5py
w = sys.argv[1]
rows = {}
for line in open(f"{w}/in.jsonl"):
    r = json.loads(line)
    rid = r.get("id") or r.get("custom_id")
    body = r.get("body", {}).get("response_format")
    if body:  # the OpenAI body's response_format, as the row reader turns it into guided_* keys
        r = {"guided_json_object": True} if body["type"] == "json_object" else {"guided_json": body["json_schema"]["schema"]}
    rows[rid] = {k: v for k, v in r.items() if k.startswith("guided_") and k != "guided_grammar"}
f = h5py.File(f"{w}/tp1.h5", "r")
ids = [x.decode() for x in f["id"][:]]
fin = [x.decode() for x in f["finish_reason"][:]]
text = [x.decode() for x in f["output_text"][:]]
cases, texts = [], []
for i, rid, tokens in zip(range(len(ids)), ids, f["output_tokens"][:]):
    keys = rows[rid]
    if not keys or fin[i] not in ("stop", "eos", "length"):
        continue
    keys.update(guided_max_string_length=10, guided_max_items=3)
    tokens = [int(t) for t in tokens]
    if fin[i] == "eos":
        tokens = tokens[:-1]  # EOS: the last step's mask allows it; the walk ends before it
    cases.append({"id": rid, **keys, "tokens": tokens})
    if fin[i] != "length" and text[i] and rid != "edge:stop":  # a stop string cut that row's text
        texts.append({"id": rid, **keys, "text": text[i]})
with open(f"{w}/cases-model.jsonl", "w") as out:
    out.writelines(json.dumps(c) + "\n" for c in cases)
with open(f"{w}/cases-text.jsonl", "w") as out:
    out.writelines(json.dumps(c) + "\n" for c in texts)
PY
COMPARE="$HERE/../guided/compare_masks_with_llguidance.py"
"$REF_PY" "$COMPARE" "$MASKS" "$STORIES/tokenizer.json" 2 "$WORK/cases-model.jsonl" stories260K ||
  fail "the masks differ from llguidance's on stories260K's vocabulary"
[ -n "$TEST_TOKENIZERS" ] || fail "TPBATCH_TEST_TOKENIZERS_DIR is not set"
"$REF_PY" "$COMPARE" "$MASKS" "$TEST_TOKENIZERS/llama-spm/tokenizer.json" 2 "$WORK/cases-text.jsonl" llama-spm ||
  fail "the masks differ from llguidance's on Llama-2's vocabulary"
"$REF_PY" "$COMPARE" "$MASKS" "$TEST_TOKENIZERS/gpt-2/tokenizer.json" 50256 "$WORK/cases-text.jsonl" gpt-2 ||
  fail "the masks differ from llguidance's on GPT-2's vocabulary"
