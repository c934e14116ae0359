#!/usr/bin/env python3
"""Small helpers of scripts/gpu_check.sh, one subcommand each (standard library only, except
`compare`, which needs h5py and numpy):

  prompts FILE ROWS PROMPT_TOKENS VOCAB [SEED]  JSONL of rows {"id", "tokens": [ids]}, ids in [3, VOCAB)
  compare A.h5 B.h5 [--tol T] [--rtol R] [--near-tie EPS] [--outliers F] [--embed-tol E]
                                                tokens, logprobs (and embeddings) of A against the reference B (one line)
  gtest XML [XML...]                            one line per test (over every rank's report): name|status|max_rel_err|seconds
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


def _rows(f, path):
    """Per row: (prompt tokens, output tokens, logprobs, top tokens [n, k] or None, top logprobs,
    embedding or None)."""
    import numpy as np

    out = []
    has_top = "top_logprob_tokens" in f and "top_logprobs" in f
    for i in range(len(f["output_tokens"])):
        if f["done"][i] != 1 or f["finish_reason"][i] in (b"error", "error"):
            raise ValueError("%s: row %d not done or failed: %r" % (path, i, f["error"][i]))
        toks = np.asarray(f["output_tokens"][i], dtype=np.int64)
        top_t = top_l = None
        if has_top and len(toks) and len(f["top_logprob_tokens"][i]):
            k = len(f["top_logprob_tokens"][i]) // len(toks)
            top_t = np.asarray(f["top_logprob_tokens"][i], dtype=np.int64).reshape(len(toks), k)
            top_l = np.asarray(f["top_logprobs"][i], dtype=np.float64).reshape(len(toks), k)
        emb = np.asarray(f["embedding"][i], dtype=np.float64) if "embedding" in f else None
        out.append((np.asarray(f["prompt_tokens"][i], dtype=np.int64), toks,
                    np.asarray(f["output_logprobs"][i], dtype=np.float64), top_t, top_l, emb))
    return out


def compare(a_path, b_path, *opts):
    """Greedy runs, A (under test) against B (the reference), row by row.

    Up to the first position where the two choose different tokens the texts are the same, so
    every logprob there is compared: each |Δlogprob| must be <= --tol + --rtol x |B's logprob|
    (bf16 errors in the logits grow with their magnitude, and an unlikely token's logprob is a
    large logit difference); --outliers F lets a fraction F of the compared positions exceed it
    (mixture-of-experts models, whose router may itself face a near tie). Past it the runs
    continue different texts and nothing is comparable. A row may diverge only at a near tie: A's
    token is among B's top logprobs at that position (B run with sampling.top_logprobs >= 2) and
    its logprob under B is within --near-tie of B's own choice; its logprob under A and under B are
    then compared too. Any other divergence fails the row (--near-tie 0: every divergence fails).
    Score runs (the same tokens on both) compare every logprob; embed runs compare each row's
    embedding within --embed-tol relative L2 error.

    Prints one line: VERDICT ROWS_SAME ROWS NEAR_TIES TOKENS_COMMON TOKENS MAX_DLOGPROB FIRST_DIFF
    (VERDICT pass or FAIL; FIRST_DIFF rowI@POS or -); why each diverging row was or was not
    accepted goes to stderr."""
    import h5py
    import numpy as np

    tol, rtol, near_tie, outliers, embed_tol = 0.0, 0.0, 0.0, 0.0, 0.0
    it = iter(opts)
    for o in it:
        if o == "--tol":
            tol = float(next(it))
        elif o == "--rtol":
            rtol = float(next(it))
        elif o == "--near-tie":
            near_tie = float(next(it))
        elif o == "--outliers":
            outliers = float(next(it))
        elif o == "--embed-tol":
            embed_tol = float(next(it))
        else:
            raise SystemExit("compare: unknown option %s" % o)
    with h5py.File(a_path, "r") as fa, h5py.File(b_path, "r") as fb:
        ra, rb = _rows(fa, a_path), _rows(fb, b_path)
    if len(ra) != len(rb):
        sys.stderr.write("rows differ: %d vs %d\n" % (len(ra), len(rb)))
        print("FAIL 0 %d 0 0 0 nan rows:%d/%d" % (len(rb), len(ra), len(rb)))
        return 0
    rows_same = ties = tok_common = tok_total = bad = compared = over = 0
    max_d = 0.0
    first = "-"

    def check(i, pos, la_, lb_):  # logprobs at compared positions: count those beyond the bound
        nonlocal over, compared, max_d
        d = np.abs(np.asarray(la_) - np.asarray(lb_))
        if not d.size:
            return
        max_d = max(max_d, float(np.max(d)))
        beyond = np.nonzero(d > tol + rtol * np.abs(np.asarray(lb_)))[0]
        compared += d.size
        over += len(beyond)
        for j in beyond[:3]:
            sys.stderr.write("row %d: |dlogprob| %.4f at %d (reference %.4f)\n" % (i, d[j], pos[j], np.asarray(lb_)[j]))

    for i, ((pa, ta, la, _, _, ea), (pb, tb, lb, top_t, top_l, eb)) in enumerate(zip(ra, rb)):
        if ea is not None and eb is not None and (len(ea) or len(eb)):
            e = float(np.linalg.norm(ea - eb) / max(np.linalg.norm(eb), 1e-30)) if ea.shape == eb.shape else float("inf")
            max_d = max(max_d, e)
            if e > embed_tol:
                bad += 1
                sys.stderr.write("row %d: embedding relative error %.4g > %g\n" % (i, e, embed_tol))
            else:
                rows_same += 1
            continue
        tok_total += max(len(ta), len(tb))
        if not np.array_equal(pa, pb):
            sys.stderr.write("row %d: prompt tokens differ\n" % i)
            bad += 1
            first = "row%d@prompt" % i if first == "-" else first
            continue
        n = min(len(ta), len(tb))
        diff = np.nonzero(ta[:n] != tb[:n])[0]
        k = int(diff[0]) if len(diff) else n
        tok_common += k
        check(i, np.arange(k), la[:k], lb[:k])
        if k == len(ta) == len(tb):
            rows_same += 1
            continue
        if first == "-":
            first = "row%d@%d" % (i, k)
        why = None
        if k == n:
            why = "lengths differ (%d vs %d tokens)" % (len(ta), len(tb))
        elif near_tie <= 0:
            why = "no near ties allowed"
        elif top_l is None:
            why = "the reference has no top logprobs"
        else:
            hit = np.nonzero(top_t[k] == ta[k])[0]
            if not len(hit):
                why = "token %d is not among the reference's top %d (%s)" % (
                    ta[k], top_t.shape[1], ", ".join("%d: %.4f" % (t, l) for t, l in zip(top_t[k], top_l[k])))
            else:
                lp_ab = top_l[k][hit[0]]  # A's token under B
                gap = top_l[k][0] - lp_ab
                if gap > near_tie:
                    why = "token %d vs %d, reference gap %.4f > %g: not a near tie" % (ta[k], tb[k], gap, near_tie)
                else:
                    ties += 1
                    check(i, [k], [la[k]], [lp_ab])
                    sys.stderr.write("row %d: near tie at %d: token %d vs %d, reference gap %.4f; compared up to it\n"
                                     % (i, k, ta[k], tb[k], gap))
        if why:
            bad += 1
            sys.stderr.write("row %d: diverges at %d: %s\n" % (i, k, why))
    if over > outliers * compared:
        bad += 1
        sys.stderr.write("%d of %d compared logprobs beyond %g + %g x |reference| (%g allowed)\n"
                         % (over, compared, tol, rtol, outliers * compared))
    verdict = "pass" if bad == 0 else "FAIL"
    print("%s %d %d %d %d %d %.3g %s" % (verdict, rows_same, len(ra), ties, tok_common, tok_total, max_d, first))
    return 0


def gtest(*paths):
    """One line per test, over the reports of every rank that ran it: FAIL if it failed on any,
    skipped if skipped on all, else pass; the largest max_rel_err and time."""
    tests = {}
    for path in paths:
        root = ET.parse(path).getroot()
        for case in root.iter("testcase"):
            name = "%s.%s" % (case.get("classname"), case.get("name"))
            if case.find("failure") is not None:
                status = "FAIL"
            elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
                status = "skipped"
            else:
                status = "pass"
            err = None
            props = case.find("properties")
            if props is not None:
                for p in props.iter("property"):
                    if p.get("name") == "max_rel_err":
                        err = p.get("value")
            if err is None:
                err = case.get("max_rel_err")  # RecordProperty outside <properties> (older gtest)
            t = tests.setdefault(name, {"status": [], "err": [], "time": []})
            t["status"].append(status)
            if err is not None:
                t["err"].append(float(err))
            t["time"].append(float(case.get("time", "0") or 0))
    for name, t in tests.items():
        st = t["status"]
        status = "FAIL" if "FAIL" in st else "skipped" if all(x == "skipped" for x in st) else "pass"
        err = "%.3g" % max(t["err"]) if t["err"] else "-"
        print("%s|%s|%s|%.3g" % (name, status, err, max(t["time"])))
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
