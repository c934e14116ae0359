#!/usr/bin/env python3
"""Small helpers of scripts/gpu_check.sh, one subcommand each (standard library only, except
`compare`, which needs h5py and numpy):

  prompts FILE ROWS PROMPT_TOKENS VOCAB [SEED]  JSONL of rows {"id", "tokens": [ids]}, ids in [3, VOCAB)
  compare A.h5 B.h5                             greedy tokens and logprobs of two results files (one line)
  gtest XML                                     one line per test: name|status|max_rel_err|seconds
  flops MODEL_DIR PROMPT_TOKENS                 FLOPs per prefill token (matmuls + causal attention)
  floor WEIGHT_BYTES KV_BYTES_PER_TOKEN BATCH CONTEXT BW_GBS [MODEL_DIR]   decode step floor in ms
"""
import json
import random
import sys
import xml.etree.ElementTree as ET


def prompts(path, rows, prompt_tokens, vocab, seed=0):
    rng = random.Random(int(seed))
    with open(path, "w") as f:
        for i in range(int(rows)):
            ids = [rng.randrange(3, int(vocab)) for _ in range(int(prompt_tokens))]
            f.write(json.dumps({"id": "r%d" % i, "tokens": ids}) + "\n")


def compare(a_path, b_path):
    """Row by row: tokens equal up to the first difference; |Δlogprob| over that common prefix
    (after a different token the two runs continue different texts, so later logprobs are not
    comparable). Prints: rows_same rows tokens_same tokens max_dlogprob first_diff"""
    import h5py
    import numpy as np

    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        na, nb = len(a["output_tokens"]), len(b["output_tokens"])
        if na != nb:
            print("rows differ: %d vs %d" % (na, nb))
            return 1
        rows_same = tok_same = tok_total = 0
        max_d = 0.0
        first = "-"
        for i in range(na):
            ta, tb = np.asarray(a["output_tokens"][i]), np.asarray(b["output_tokens"][i])
            la, lb = np.asarray(a["output_logprobs"][i]), np.asarray(b["output_logprobs"][i])
            n = min(len(ta), len(tb))
            diff = np.nonzero(ta[:n] != tb[:n])[0]
            common = int(diff[0]) if len(diff) else n
            tok_same += common
            tok_total += max(len(ta), len(tb))
            if common == len(ta) == len(tb):
                rows_same += 1
            elif first == "-":
                first = "row%d@%d" % (i, common)
            m = min(common + 1, len(la), len(lb))  # the first differing token's logprob is comparable
            if m:
                max_d = max(max_d, float(np.max(np.abs(la[:m].astype(np.float64) - lb[:m]))))
        print("%d %d %d %d %.3g %s" % (rows_same, na, tok_same, tok_total, max_d, first))
    return 0


def gtest(path):
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = "%s.%s" % (case.get("classname"), case.get("name"))
        if case.find("failure") is not None:
            status = "FAIL"
        elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
            status = "skipped"
        else:
            status = "pass"
        err = "-"
        props = case.find("properties")
        if props is not None:
            for p in props.iter("property"):
                if p.get("name") == "max_rel_err":
                    err = p.get("value")
        if err == "-" and case.get("max_rel_err"):
            err = case.get("max_rel_err")  # RecordProperty outside <properties> (older gtest)
        print("%s|%s|%s|%s" % (name, status, err, case.get("time", "?")))
    return 0


def flops(model_dir, prompt_tokens):
    with open(model_dir + "/config.json") as f:
        c = json.load(f)
    h, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or h // heads
    per_layer = h * (heads * hd + 2 * kv * hd) + heads * hd * h + 3 * h * inter
    # 2 FLOPs per weight per token; causal attention: QK^T and PV over on average half the prompt.
    attn = 2 * 2 * layers * heads * hd * (int(prompt_tokens) / 2.0)
    print("%.6g" % (2.0 * layers * per_layer + attn))
    return 0


def params(c):
    h, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or h // heads
    per_layer = h * (heads * hd + 2 * kv * hd) + heads * hd * h + 3 * h * inter + 2 * h
    embed = c["vocab_size"] * h
    head = 0 if c.get("tie_word_embeddings") else c["vocab_size"] * h
    return layers * per_layer + embed + head + h, embed


def floor(weight_bytes, kv_bytes_per_token, batch, context, bw_gbs, model_dir=None):
    """Bytes one decode step must read: every weight but the embedding table (a step gathers only
    its rows; a tied table is read whole as the LM head), plus the KV cache of every sequence."""
    weights_read = float(weight_bytes)
    if model_dir:
        with open(model_dir + "/config.json") as f:
            c = json.load(f)
        total, embed = params(c)
        if not c.get("tie_word_embeddings"):
            weights_read *= 1.0 - embed / float(total)
    bytes_read = weights_read + float(kv_bytes_per_token) * int(batch) * float(context)
    print("%.4g" % (1e3 * bytes_read / (float(bw_gbs) * 1e9)))
    return 0


def main(argv):
    commands = {"prompts": prompts, "compare": compare, "gtest": gtest, "flops": flops, "floor": floor}
    if len(argv) < 2 or argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[argv[1]](*argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
