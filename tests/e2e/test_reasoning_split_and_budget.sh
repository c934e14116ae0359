#!/usr/bin/env bash
# Reasoning models: on a generated model made a reasoning one (tests/e2e/reasoning_model.py:
# <think> / </think> as single added tokens, Qwen3's real chat template), the job key `reasoning`
# splits each row's text as vLLM's parsers do (checked against this file's own Python of those
# rules, applied to the unsplit text of a run with `reasoning: none`), and `max_reasoning_tokens`
# (job and row) forces </think> after exactly N tokens of an open block: the tokens before it are
# the free run's, the ones after it the numpy reference's greedy continuation, rows without an open
# block are untouched. TP=2 and PP=2 give identical tokens and texts, `auto` picks qwen3 from the template,
# export writes vLLM's reasoning_content, a resume recomputes rows identically, bad values exit 2
# (or make an error row) naming the key.
source "$(dirname "$0")/lib.sh"
need_numpy_h5py
NEW=12
generated_model m --seed 7
$PY "$HERE/reasoning_model.py" "$WORK/m" "$HERE/../data/chat_templates/qwen3.jinja"
$PY - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
open_block = "<|im_start|>user\nIs 7 prime?<|im_end|>\n<|im_start|>assistant\n<think>\n"  # as a thinking template ends
msgs = [{"role": "user", "content": "Is 7 prime?"}]
rows = [
    {"id": "budget3", "prompt": open_block, "max_reasoning_tokens": 3},
    {"id": "job_budget", "prompt": "Once upon a time <think> the"},
    {"id": "budget0", "prompt": open_block, "max_reasoning_tokens": 0},
    {"id": "sampled", "prompt": open_block, "max_reasoning_tokens": 4, "temperature": 1.0, "seed": 11},
    {"id": "thinking_off", "messages": msgs, "chat_template_kwargs": {"enable_thinking": False}, "max_reasoning_tokens": 1},
    {"id": "no_block", "messages": msgs, "max_reasoning_tokens": 1},
    {"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions",
     "body": {"messages": msgs, "chat_template_kwargs": {"enable_thinking": False}, "max_tokens": 12}},
    {"custom_id": "completion", "method": "POST", "url": "/v1/completions",
     "body": {"prompt": open_block, "max_reasoning_tokens": 2, "max_tokens": 12}},
]
def strip_budget(r):
    r = json.loads(json.dumps(r))
    r.pop("max_reasoning_tokens", None)
    r.get("body", {}).pop("max_reasoning_tokens", None)
    return r
with open(f"{w}/in.jsonl", "w") as f, open(f"{w}/free.jsonl", "w") as g:
    for r in rows:
        f.write(json.dumps(r) + "\n")
        g.write(json.dumps(strip_budget(r)) + "\n")
PY
write_job "$WORK/job.yaml" "$WORK/m" "$WORK/in.jsonl" "$WORK/qwen3.h5" "reasoning: qwen3" "sampling:" \
  "  max_new_tokens: $NEW" "  ignore_eos: true" "  max_reasoning_tokens: 5"
run() {  # run NAME NP ARGS...: the job at NP ranks, results in $WORK/NAME.h5
  local name=$1 np=$2
  shift 2
  mpirun_tpbatch "$np" "$WORK/job.yaml" --set output.path="$WORK/$name.h5" "$@" 2>"$WORK/$name.log" ||
    fail "$name: the run failed: $(tail -5 "$WORK/$name.log")"
}
run qwen3 1
run qwen3_tp2 2 --set parallel.tensor=2
run qwen3_pp2 2 --set parallel.pipeline=2
run auto 1 --set reasoning=auto
run r1 1 --set reasoning=deepseek_r1
run unsplit 1 --set reasoning=none
run free 1 --set reasoning=none --set input.path="$WORK/free.jsonl" --set sampling.max_reasoning_tokens=~
$PY - "$WORK" <<'PY'
import sys, h5py
w = sys.argv[1]
OPEN, CLOSE = 510, 511
def load(name):
    with h5py.File(f"{w}/{name}.h5", "r") as f:
        assert f.attrs["format_version"] == 3
        out = {}
        for i, rid in enumerate(x.decode() for x in f["id"][:]):
            assert f["finish_reason"][i].decode() != "error", f"{name} {rid}: {f['error'][i].decode()}"
            out[rid] = dict(tokens=[int(t) for t in f["output_tokens"][i]], prompt=[int(t) for t in f["prompt_tokens"][i]],
                            text=f["output_text"][i].decode(), reasoning=f["reasoning_text"][i].decode(),
                            logprobs=list(f["output_logprobs"][i]), greedy=int(f["is_greedy"][i]))
        return out
runs = {n: load(n) for n in ("qwen3", "qwen3_tp2", "qwen3_pp2", "auto", "r1", "unsplit", "free")}
def split(parser, text):  # vLLM's extract_reasoning_content (deepseek_r1, qwen3), written out again
    if "<think>" in text:
        text = text.partition("<think>")[2]
    if "</think>" not in text:
        return ("", text) if parser == "qwen3" else (text, "")
    r, _, c = text.partition("</think>")
    return r, c
budgets = {"budget3": 3, "job_budget": 5, "budget0": 0, "completion": 2, "sampled": 4}
forced = 0
for rid, free in runs["free"].items():
    got = runs["qwen3"][rid]
    for other in ("qwen3_tp2", "qwen3_pp2", "auto", "r1", "unsplit"):  # the split never changes the tokens
        assert runs[other][rid]["tokens"] == got["tokens"], f"{rid}: {other} tokens {runs[other][rid]['tokens']} != {got['tokens']}"
    for other in ("qwen3_tp2", "qwen3_pp2"):
        assert runs[other][rid] | {"logprobs": 0} == got | {"logprobs": 0}, f"{rid}: {other} differs"
        assert max((abs(a - b) for a, b in zip(runs[other][rid]["logprobs"], got["logprobs"])), default=0) < 1e-3
    assert runs["auto"][rid] == got, f"{rid}: reasoning auto is not qwen3 here"
    # The budget's rule, written out again: the block's state from the prompt, then token by token
    # of the free run, up to the first token the budget replaces.
    n = budgets.get(rid)
    last_tag = [t for t in got["prompt"] if t in (OPEN, CLOSE)][-1:]
    is_open, count, at = last_tag == [OPEN], 0, None
    for i, t in enumerate(free["tokens"]):
        if n is not None and is_open and count >= n:
            at = i
            break
        if t == OPEN:
            is_open, count = True, 0
        elif t == CLOSE:
            is_open = False
        elif is_open:
            count += 1
    if at is None:
        assert got["tokens"] == free["tokens"], f"{rid}: no budget spent, yet the tokens changed"
        continue
    assert got["tokens"][:at] == free["tokens"][:at] and got["tokens"][at] == CLOSE, \
        f"{rid}: want the free tokens {free['tokens'][:at]} then {CLOSE}, got {got['tokens']}"
    assert max(abs(a - b) for a, b in zip(got["logprobs"][:at], free["logprobs"][:at]) ) < 1e-4 if at else True
    forced += 1
    if rid == "sampled":  # its draws go on from the same keys; the reference below is greedy
        continue
    assert got["greedy"] == int(free["tokens"][at] == CLOSE)
    open(f"{w}/continue_{rid}.ids", "w").write(",".join(map(str, got["prompt"] + got["tokens"][:at + 1])) + f" {len(got['tokens']) - at - 1} " + ",".join(map(str, got["tokens"][at + 1:])) + "\n")
assert forced >= 5, f"only {forced} rows forced"  # budget3, job_budget, budget0, completion, sampled
# The split, against the unsplit text of the same tokens.
for parser, name in (("qwen3", "qwen3"), ("deepseek_r1", "r1")):
    for rid, whole in runs["unsplit"].items():
        assert whole["reasoning"] == ""
        want = split(parser, whole["text"])
        got = (runs[name][rid]["reasoning"], runs[name][rid]["text"])
        assert got == want, f"{parser} {rid}: {got!r}, want {want!r} from {whole['text']!r}"
q = runs["qwen3"]
assert q["budget3"]["reasoning"] != "" and "</think>" in runs["unsplit"]["budget3"]["text"]
assert q["no_block"]["reasoning"] == "" and runs["r1"]["no_block"]["text"] == ""  # qwen3: all answer; r1: all reasoning
print("forced rows:", forced, "; budget3:", repr(q["budget3"]["reasoning"]), "|", repr(q["budget3"]["text"]))
PY
# After the forced </think>, the numpy reference's greedy continuation of prompt + tokens so far.
continued=0
for f in "$WORK"/continue_*.ids; do
  read -r ids n want <"$f"
  [ "$n" -gt 0 ] || continue
  got=$(ref_numpy generate "$WORK/m" --ids "$ids" --max-new-tokens "$n" | $PY -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["tokens"])))')
  [ "$got" = "$want" ] || fail "$(basename "$f"): after </think> the run has $want, the reference $got"
  continued=$((continued + 1))
done
[ "$continued" -ge 4 ] || fail "only $continued forced rows checked against the reference after </think>"
echo "after the forced </think>: $continued rows continue as the reference's greedy run"
# Export: vLLM's reasoning_content beside the content.
"$TPBATCH" export "$WORK/qwen3.h5" --format openai --output "$WORK/qwen3.openai.jsonl" 2>"$WORK/export.log" ||
  fail "export failed: $(cat "$WORK/export.log")"
$PY - "$WORK" <<'PY'
import json, sys, h5py
w = sys.argv[1]
with h5py.File(f"{w}/qwen3.h5", "r") as f:
    rows = {x.decode(): (f["reasoning_text"][i].decode(), f["output_text"][i].decode()) for i, x in enumerate(f["id"][:])}
def null(s): return s if s else None
lines = [json.loads(l) for l in open(f"{w}/qwen3.openai.jsonl")]
assert len(lines) == 8, len(lines)
for line in lines:
    r, c = rows[line["custom_id"]]
    choice = line["response"]["body"]["choices"][0]
    if "message" in choice:
        m = choice["message"]
        assert list(m) == ["role", "reasoning_content", "content"], list(m)
        assert m["reasoning_content"] == null(r) and m["content"] == null(c), (line["custom_id"], m, r, c)
    else:
        assert choice["reasoning_content"] == null(r) and choice["text"] == c, (line["custom_id"], choice)
print("export: reasoning_content of", len(lines), "lines")
PY
"$TPBATCH" export "$WORK/unsplit.h5" --format openai --output "$WORK/unsplit.openai.jsonl" 2>/dev/null
! grep -q reasoning_content "$WORK/unsplit.openai.jsonl" || fail "a job without reasoning exports reasoning_content"
# Resume: rows marked undone are computed again, identically.
cp "$WORK/qwen3.h5" "$WORK/resumed.h5"
$PY -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); d = f["done"]; d[0] = 0; d[3] = 0; d[7] = 0; f.attrs["complete"] = 0' "$WORK/resumed.h5"
run resumed 1 --set output.if_exists=resume
results_equal "$WORK/qwen3.h5" "$WORK/resumed.h5" || fail "the resumed file differs"
# Bad values exit 2 naming the key; a bad row value is an error row naming it.
expect_exit_2() {  # expect_exit_2 KEY ARGS...
  local key=$1
  shift
  set +e
  "$TPBATCH" "$WORK/job.yaml" --set output.path="$WORK/bad.h5" "$@" >/dev/null 2>"$WORK/bad.log"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$*: exit $rc, want 2: $(cat "$WORK/bad.log")"
  grep -q "$key" "$WORK/bad.log" || fail "$*: the error does not name $key: $(cat "$WORK/bad.log")"
}
expect_exit_2 "reasoning" --set reasoning=deepseek
expect_exit_2 "sampling.max_reasoning_tokens" --set sampling.max_reasoning_tokens=-1
expect_exit_2 "sampling.max_reasoning_tokens" --set sampling.max_reasoning_tokens=many
printf '%s\n' '{"id": "neg", "prompt": "a", "max_reasoning_tokens": -2}' >"$WORK/bad.jsonl"
write_job "$WORK/stories.yaml" "$STORIES" "$WORK/bad.jsonl" "$WORK/stories.h5" "sampling:" "  max_new_tokens: 4" \
  "  max_reasoning_tokens: 2"
echo '{"id": "no_think_tokens", "prompt": "Once upon a time"}' >>"$WORK/bad.jsonl"
"$TPBATCH" "$WORK/stories.yaml" 2>"$WORK/stories.log" || fail "the stories run failed: $(tail -3 "$WORK/stories.log")"
$PY - "$WORK/stories.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    err = [e.decode() for e in f["error"][:]]
assert "max_reasoning_tokens" in err[0] and ">= 0" in err[0], err[0]
assert "max_reasoning_tokens needs '<think>' and '</think>' to be single tokens" in err[1], err[1]
print("row errors:", err)
PY
echo "PASS: the reasoning split matches vLLM's rules, the budget forces </think> after exactly N tokens (TP=1 = TP=2 = PP=2), export, resume, bad values"
