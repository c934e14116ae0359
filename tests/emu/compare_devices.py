#!/usr/bin/env python3
"""Compares a results file computed on the CUDA backend with one computed on the CPU backend.

The CUDA backend computes with bf16 activations (and by default a bf16 KV cache), the CPU backend
in fp32, so the two agree only within what bf16 implies (8 significant bits, about 4e-3 relative
per value, compounded over the layers). Rows are matched by id; every row must be done on both.

generate: greedy tokens identical up to the first position where they differ; there, the CPU run
  (which must record `top_logprobs` >= 2) must show the CUDA run's token as its runner-up, within
  --near-tie nats of its own choice: a near tie that bf16 rounding may legitimately flip. The row
  is compared up to and including that position. Every compared logprob within --tol.
score: the same tokens (the input's), each logprob within --tol.
embed: each embedding within --rel-tol relative L2 error.

Prints one summary line: "9/9 rows agree (2 up to a near tie), max |dlogprob| 0.031".
"""
import argparse
import sys

import h5py
import numpy as np


def load(path):
    f = h5py.File(path, "r")
    if f.attrs["complete"] != 1:
        sys.exit(f"{path}: not complete")
    rows = {}
    n = f["done"].shape[0]
    for i in range(n):
        rid = f["id"][i].decode()
        if f["done"][i] != 1 or f["finish_reason"][i].decode() == "error":
            sys.exit(f"{path}: row {rid} not done or failed: {f['error'][i].decode()}")
        r = {"tokens": [int(x) for x in f["output_tokens"][i]],
             "logprobs": np.asarray(f["output_logprobs"][i], dtype=np.float64)}
        if "top_logprob_tokens" in f:
            r["top_tokens"] = [int(x) for x in f["top_logprob_tokens"][i]]
            r["top_logprobs"] = np.asarray(f["top_logprobs"][i], dtype=np.float64)
        if "embedding" in f:
            r["embedding"] = np.asarray(f["embedding"][i], dtype=np.float64)
        rows[rid] = r
    return f.attrs["task"].decode() if isinstance(f.attrs["task"], bytes) else str(f.attrs["task"]), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cuda")
    ap.add_argument("cpu")
    ap.add_argument("--tol", type=float, default=0.15, help="largest |dlogprob| of a compared token")
    ap.add_argument("--near-tie", type=float, default=0.25, help="largest CPU top-2 gap a divergence may have")
    ap.add_argument("--rel-tol", type=float, default=2e-2, help="embed: largest relative L2 error")
    ap.add_argument("--expect-rows", type=int, default=-1)
    ap.add_argument("--max-near-ties", type=int, default=-1, help="fail when more rows than this diverge")
    a = ap.parse_args()
    task, gpu = load(a.cuda)
    _, cpu = load(a.cpu)
    if set(gpu) != set(cpu):
        sys.exit(f"row ids differ: {sorted(set(gpu) ^ set(cpu))[:10]}")
    if a.expect_rows >= 0 and len(gpu) != a.expect_rows:
        sys.exit(f"expected {a.expect_rows} rows, got {len(gpu)}")
    bad = ties = 0
    worst = 0.0
    for rid in sorted(gpu):
        g, c = gpu[rid], cpu[rid]
        if task == "embed":
            e = np.linalg.norm(g["embedding"] - c["embedding"]) / max(np.linalg.norm(c["embedding"]), 1e-30)
            worst = max(worst, e)
            if e > a.rel_tol:
                print(f"row {rid}: embedding relative error {e:.3g} > {a.rel_tol}")
                bad += 1
            continue
        tg, tc = g["tokens"], c["tokens"]
        n = min(len(tg), len(tc))
        k = next((i for i in range(n) if tg[i] != tc[i]), n)
        upto = n
        if k < n or len(tg) != len(tc):
            if task != "generate" or k == n:
                print(f"row {rid}: tokens differ at {k} (lengths {len(tg)} / {len(tc)})")
                bad += 1
                continue
            if "top_tokens" not in c or len(c["top_tokens"]) < 2 * len(tc):
                sys.exit(f"{a.cpu}: the CPU run must record top_logprobs >= 2 to judge near ties")
            kk = len(c["top_tokens"]) // len(tc)
            top_t, top_l = c["top_tokens"][k * kk:(k + 1) * kk], c["top_logprobs"][k * kk:(k + 1) * kk]
            if tg[k] != top_t[1] or top_l[0] - top_l[1] > a.near_tie:
                print(f"row {rid}: tokens differ at {k} ({tg[k]} on cuda, {tc[k]} on cpu; cpu's top 2 "
                      f"{top_t[:2]} at {top_l[0]:.4f} / {top_l[1]:.4f}): not a near tie")
                bad += 1
                continue
            ties += 1
            d = abs(g["logprobs"][k] - top_l[1])
            worst = max(worst, d)
            if d > a.tol:
                print(f"row {rid}: at the near tie the cuda token's logprob differs by {d:.3g}")
                bad += 1
                continue
            upto = k
        d = float(np.max(np.abs(g["logprobs"][:upto] - c["logprobs"][:upto]))) if upto else 0.0
        worst = max(worst, d)
        if d > a.tol:
            print(f"row {rid}: logprobs differ by {d:.3g} (tolerance {a.tol})")
            bad += 1
    if a.max_near_ties >= 0 and ties > a.max_near_ties:
        print(f"{ties} rows diverge at near ties: more than the {a.max_near_ties} allowed")
        bad += 1
    what = "max relative error" if task == "embed" else "max |dlogprob|"
    print(f"{len(gpu) - bad}/{len(gpu)} rows agree ({ties} up to a near tie), {what} {worst:.3g}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
