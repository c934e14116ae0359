#!/usr/bin/env python3
"""Checks a tpbatch results file against the independent reference (tpbatch_reference).

generate: every row's output tokens equal the reference's greedy continuation of its prompt
tokens (ignore_eos, max_new_tokens), and each output logprob is within --tol of the reference's.
score / perplexity: every row's logprobs within --tol, logprob_sum within 5*tol, is_greedy exact.
"""
import argparse
import subprocess
import sys

import h5py
import numpy as np


def ref(reference, model, args):
    out = subprocess.run([reference, model] + args, check=True, capture_output=True, text=True).stdout
    return out.split()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--reference", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--task", default="generate")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--expect-rows", type=int, default=-1)
    a = ap.parse_args()
    f = h5py.File(a.results, "r")
    n = f["done"].shape[0]
    if a.expect_rows >= 0 and n != a.expect_rows:
        sys.exit(f"expected {a.expect_rows} rows, file has {n}")
    assert f.attrs["complete"] == 1, "file not complete"
    bad = 0
    for i in range(n):
        rid = f["id"][i].decode()
        if f["done"][i] != 1:
            print(f"row {i} ({rid}): not done"); bad += 1; continue
        if f["finish_reason"][i].decode() == "error":
            print(f"row {i} ({rid}): error {f['error'][i].decode()}"); bad += 1; continue
        prompt = [int(x) for x in f["prompt_tokens"][i]]
        out = [int(x) for x in f["output_tokens"][i]]
        lps = np.asarray(f["output_logprobs"][i], dtype=np.float64)
        ids = ",".join(map(str, prompt))
        if a.task == "generate":
            want = [int(x) for x in ref(a.reference, a.model, ["--ids", ids, "--max-new-tokens", str(a.max_new_tokens)])]
            if out != want:
                print(f"row {i} ({rid}): tokens differ\n  got  {out}\n  want {want}"); bad += 1; continue
            full = prompt + out
            start = len(prompt)
        elif a.task == "score":
            full, start = prompt + out, len(prompt)
        else:  # perplexity: the prompt scores itself, output = prompt[1:]
            full, start = prompt, 1
            if out != prompt[1:]:
                print(f"row {i} ({rid}): output tokens are not prompt[1:]"); bad += 1; continue
        if len(out) == 0:
            continue
        want_lp = np.array([float(x) for x in ref(a.reference, a.model, ["--ids", ",".join(map(str, full)), "--score", "--targets-from", str(start)])])
        if len(lps) and np.max(np.abs(lps - want_lp)) > a.tol:
            print(f"row {i} ({rid}): logprobs differ by {np.max(np.abs(lps - want_lp)):.3g}"); bad += 1; continue
        if a.task != "generate":
            if f["finish_reason"][i].decode() != "scored":
                print(f"row {i} ({rid}): finish_reason {f['finish_reason'][i]}"); bad += 1
            if abs(f["logprob_sum"][i] - want_lp.sum()) > 5 * a.tol:
                print(f"row {i} ({rid}): logprob_sum {f['logprob_sum'][i]} vs {want_lp.sum()}"); bad += 1
            greedy = all(int(g) == t for g, t in zip(ref_argmax(a, full, start), full[start:]))
            if bool(f["is_greedy"][i]) != greedy:
                print(f"row {i} ({rid}): is_greedy {f['is_greedy'][i]} vs {greedy}"); bad += 1
    print(f"{n - bad}/{n} rows match the reference")
    sys.exit(1 if bad else 0)


def ref_argmax(a, full, start):
    # The reference's greedy choice at each scored position: generate one token from each prefix.
    return [int(ref(a.reference, a.model, ["--ids", ",".join(map(str, full[:p])), "--max-new-tokens", "1"])[0])
            for p in range(start, len(full))]


if __name__ == "__main__":
    main()
