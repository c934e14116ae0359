#!/usr/bin/env python3
"""An independent W8A8 reading of an int8 run: scripts/hf_reference.py's numpy Llama on the
dequantized float32 twin, with every quantized projection's input quantized per row as the
checkpoint's activation scheme says (s = max|x| / 127, q = round-half-even(x / s), q * s fed to
the weights), in float64. Teacher-forced on each row's prompt + output tokens of the int8 run's
results file: each output logprob must agree within --tol, and each greedy token must be the
reference's argmax unless the reference's two best are within --near-tie (then the row is
compared only up to there).

Usage: w8a8_reference.py TWIN_DIR RESULTS.h5... --tol T --near-tie E
"""
import argparse
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import hf_reference  # noqa: E402


class PerTokenInt8Input:
    """w.T for `x @ w.T`: x quantized per row first (round-trips through int8)."""

    __array_ufunc__ = None  # numpy's matmul defers to __rmatmul__

    def __init__(self, w):
        self.w = w

    @property
    def T(self):
        return self

    def __rmatmul__(self, x):
        amax = np.abs(x).max(axis=-1, keepdims=True)
        s = np.where(amax > 0, amax / 127.0, 1.0)
        q = np.clip(np.rint(x / s), -127, 127)
        return (q * s) @ self.w.T


def check(model, path, tol, near_tie):
    """The number of rows of one results file that disagree with the reference."""
    f = h5py.File(path, "r")
    worst, bad, ties = 0.0, 0, 0
    for i in range(f["done"].shape[0]):
        prompt = [int(t) for t in f["prompt_tokens"][i]]
        out = [int(t) for t in f["output_tokens"][i]]
        lp = np.asarray(f["output_logprobs"][i], dtype=np.float64)
        ref = hf_reference.log_softmax(model.logits(prompt + out))[len(prompt) - 1:-1]
        n = len(out)
        for k in range(len(out)):
            top2 = np.sort(ref[k])[-2:]
            if int(np.argmax(ref[k])) != out[k]:
                if top2[1] - ref[k][out[k]] >= near_tie:
                    print(f"row {i}: token {k} is {out[k]}, the reference's argmax {int(np.argmax(ref[k]))} "
                          f"({ref[k][out[k]]:.4f} vs {top2[1]:.4f}: not a near tie)")
                    bad += 1
                ties += 1
                n = k + 1
                break
        d = float(np.max(np.abs(lp[:n] - ref[np.arange(n), out[:n]]))) if n else 0.0
        worst = max(worst, d)
        if d > tol:
            print(f"row {i}: logprobs differ from the W8A8 reference by {d:.3g} (tolerance {tol})")
            bad += 1
    print(f"W8A8 reference, {os.path.basename(path)}: {f['done'].shape[0]} rows, {ties} compared up to a near tie, "
          f"max |dlogprob| {worst:.3g}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("twin")
    ap.add_argument("results", nargs="+")
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--near-tie", type=float, required=True)
    a = ap.parse_args()
    model = hf_reference.NumpyModel(a.twin)
    for name in list(model.w):
        if name.endswith("_proj.weight"):
            model.w[name] = PerTokenInt8Input(model.w[name])
    bad = sum(check(model, path, a.tol, a.near_tie) for path in a.results)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
