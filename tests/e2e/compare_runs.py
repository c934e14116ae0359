#!/usr/bin/env python3
"""Compares two tpbatch generate results files row by row (rows matched by id).

Every row: output tokens identical and each output logprob within --tol.

Near ties (--near-tie EPS with --reference/--model): where the two runs first choose different
tokens a and b, the independent double-precision reference scores both after the common prefix;
if |logprob(a) - logprob(b)| < EPS the two candidates are a near tie that a change of rounding may
legitimately flip, and the row is compared only up to that position (reported as such). Any other
difference fails. Without --near-tie every difference fails.

Prints the largest logprob difference seen and the counts, e.g. "9/9 rows match (0 compared up to a
near tie), max |dlogprob| 3.1e-06".
"""
import argparse
import subprocess
import sys

import h5py
import numpy as np


def rows(path):
    f = h5py.File(path, "r")
    assert f.attrs["complete"] == 1, path + ": file not complete"
    out = {}
    for i in range(f["done"].shape[0]):
        rid = f["id"][i].decode()
        if f["done"][i] != 1 or f["finish_reason"][i].decode() == "error":
            sys.exit(f"{path}: row {rid} not done or failed: {f['error'][i].decode()}")
        out[rid] = ([int(x) for x in f["prompt_tokens"][i]], [int(x) for x in f["output_tokens"][i]],
                    np.asarray(f["output_logprobs"][i], dtype=np.float64))
    return out


def ref_logprob(a, ids, token):
    full = ids + [token]
    out = subprocess.run([a.reference, a.model, "--ids", ",".join(map(str, full)), "--score", "--targets-from",
                          str(len(ids))], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--near-tie", type=float, default=0.0)
    ap.add_argument("--reference")
    ap.add_argument("--model")
    ap.add_argument("--expect-rows", type=int, default=-1)
    a = ap.parse_args()
    ra, rb = rows(a.a), rows(a.b)
    if set(ra) != set(rb):
        sys.exit(f"row ids differ: {sorted(set(ra) ^ set(rb))}")
    if a.expect_rows >= 0 and len(ra) != a.expect_rows:
        sys.exit(f"expected {a.expect_rows} rows, got {len(ra)}")
    bad = ties = 0
    worst = 0.0
    for rid in sorted(ra):
        pa, ta, la = ra[rid]
        pb, tb, lb = rb[rid]
        if pa != pb:
            print(f"row {rid}: prompt tokens differ"); bad += 1; continue
        n = min(len(ta), len(tb))
        k = next((i for i in range(n) if ta[i] != tb[i]), n)
        if k < n or len(ta) != len(tb):
            if k == n or a.near_tie <= 0:
                print(f"row {rid}: tokens differ at {k}\n  a {ta}\n  b {tb}"); bad += 1; continue
            prefix = pa + ta[:k]
            lpa, lpb = ref_logprob(a, prefix, ta[k]), ref_logprob(a, prefix, tb[k])
            if abs(lpa - lpb) >= a.near_tie:
                print(f"row {rid}: tokens differ at {k} ({ta[k]} vs {tb[k]}, reference logprobs {lpa:.6f} vs "
                      f"{lpb:.6f}: not a near tie)"); bad += 1; continue
            print(f"row {rid}: near tie at output position {k}: tokens {ta[k]} / {tb[k]}, reference logprobs "
                  f"{lpa:.6f} / {lpb:.6f}; compared up to it")
            ties += 1
            n = k + 1  # the position itself: both chose a maximum, their logprobs still agree
        d = float(np.max(np.abs(la[:n] - lb[:n]))) if n else 0.0
        worst = max(worst, d)
        if d > a.tol:
            print(f"row {rid}: logprobs differ by {d:.3g} (tolerance {a.tol})"); bad += 1
    print(f"{len(ra) - bad}/{len(ra)} rows match ({ties} compared up to a near tie), max |dlogprob| {worst:.3g}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
