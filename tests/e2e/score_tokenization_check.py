"""Checks a score results file for the lm-eval tokenization test: each named row's completion
tokens are the expected vocabulary pieces (looked up in tokenizer.json, not through tpbatch), and
its logprob_sum equals the independent reference's sum over the same ids.

usage: score_tokenization_check.py RESULTS.h5 REFERENCE MODEL ROW=PIECE,PIECE,...[:MIN_SUM:MAX_SUM] ...
"""
import json
import subprocess
import sys

import h5py


def main():
    results, reference, model = sys.argv[1:4]
    vocab = json.load(open(model + "/tokenizer.json"))["model"]["vocab"]
    piece = {i: p for p, i in vocab.items()}
    with h5py.File(results, "r") as f:
        ids = [x.decode() for x in f["id"][:]]
        for spec in sys.argv[4:]:
            row, rest = spec.split("=", 1)
            parts = rest.split(":")
            want = parts[0].split(",")
            i = ids.index(row)
            if f["finish_reason"][i].decode() != "scored":
                sys.exit(f"{row}: finish_reason {f['finish_reason'][i].decode()} {f['error'][i].decode()}")
            prompt = [int(x) for x in f["prompt_tokens"][i]]
            out = [int(x) for x in f["output_tokens"][i]]
            got = [piece[t] for t in out]
            if got != want:
                sys.exit(f"{row}: completion tokens {got}, expected {want}")
            full = prompt + out
            lp = subprocess.run([reference, model, "--ids", ",".join(map(str, full)), "--score", "--targets-from",
                                 str(len(prompt))], check=True, capture_output=True, text=True).stdout.split()
            ref_sum = sum(float(x) for x in lp)
            s = float(f["logprob_sum"][i])
            if abs(s - ref_sum) > 1e-3:
                sys.exit(f"{row}: logprob_sum {s}, reference {ref_sum}")
            if len(parts) == 3 and not (float(parts[1]) <= s <= float(parts[2])):
                sys.exit(f"{row}: logprob_sum {s} outside [{parts[1]}, {parts[2]}]")
            print(f"{row}: {got} logprob_sum {s:.4f} (reference {ref_sum:.4f})")


if __name__ == "__main__":
    main()
