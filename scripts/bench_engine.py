#!/usr/bin/env python3
"""Engine benchmarks on the ~125M generated model (CPU backend), printed against measured bounds.

  prefill   tokens/s and GEMM rate as a share of the machine's fp32 GEMM peak
  decode    one sequence: tokens/s as a share of the bandwidth floor (read bandwidth / weight bytes)
  batching  64 rows x (128 prompt + 128 new) at max_seqs 1, 8, 32, 64 for 1 rank x 2 threads,
            TP=2 and DP=2 (both cores in each case), with each step's GEMM rate vs the peak
  pipeline  TP=2xPP=2 vs TP=2 decode throughput on 4 ranks, and the per-stage busy fraction

Usage: scripts/bench_engine.sh [BUILD_DIR] [--quick]
"""
import json
import os
import random
import re
import subprocess
import sys

import h5py

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
QUICK = "--quick" in sys.argv
TP = os.path.join(BUILD, "tpbatch")
WORK = os.path.join(BUILD, "bench")
MODEL = os.path.join(WORK, "125m")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=ENV, **kw)


def machine():
    out = sh([os.path.join(BUILD, "benchmarks", "tpbatch_machine_bench"), "--threads", "2"]).stdout
    vals = dict(line.split(None, 1) for line in out.strip().splitlines())
    return vals["blas_core"], float(vals["gemm_gflops"]), float(vals["read_gbps"])


def write_rows(path, rows, prompt_len, vocab, **extra):
    rnd = random.Random(1)
    with open(path, "w") as f:
        for i in range(rows):
            f.write(json.dumps(dict(id=f"r{i}", ids=[rnd.randrange(3, vocab) for _ in range(prompt_len)], **extra)) + "\n")


def run(np_, jsonl, out, sets):
    job = os.path.join(WORK, "job.yaml")
    with open(job, "w") as f:
        f.write(f"model: {MODEL}\ninput:\n  path: {jsonl}\n  tokens_field: ids\noutput:\n  path: {out}\n"
                f"  if_exists: overwrite\n  logprobs: false\nsampling:\n  ignore_eos: true\n")
    args = [TP, job] + [a for s in sets for a in ("--set", s)]
    if np_ > 1:
        args = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none"] + args
    log = subprocess.run(args, check=True, capture_output=True, text=True, env=ENV).stderr
    m = dict(h5py.File(out)["metrics"].attrs)
    return m, log


def main():
    os.makedirs(WORK, exist_ok=True)
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        sh([TP, "make-model", MODEL, "--preset", "125m"])
    cfg = json.load(open(os.path.join(MODEL, "config.json")))
    H, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    hd = H // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    per_layer = H * H + 2 * kv * H + H * H + 3 * H * I
    matmul_params = L * per_layer + V * H          # weights read per decode step (embedding table excluded)
    weight_bytes = 4 * matmul_params
    core, peak, bw = machine()
    print(f"machine: OpenBLAS core {core}; fp32 GEMM peak {peak:.1f} GFLOP/s (2 threads); read bandwidth {bw:.1f} GB/s")
    print(f"model: 125M-shaped, {matmul_params/1e6:.1f}M matmul parameters, {weight_bytes/2**20:.0f} MiB read per decode step")

    # Prefill: 8 rows x 512 tokens, one new token each.
    jp = os.path.join(WORK, "prefill.jsonl")
    write_rows(jp, 8, 512, V)
    m, _ = run(1, jp, os.path.join(WORK, "p.h5"), ["sampling.max_new_tokens=1", "engine.max_seqs=8", "engine.threads=2"])
    toks = m["prompt_tokens"]
    rate = toks / m["wall_seconds"]
    gflops = 2 * matmul_params * toks / m["wall_seconds"] / 1e9
    print(f"prefill: {rate:.0f} tokens/s; GEMM {gflops:.1f} GFLOP/s = {gflops/peak:.2f} of peak (target >= 0.6)")

    # Decode, one sequence.
    jd = os.path.join(WORK, "decode.jsonl")
    write_rows(jd, 1, 16, V)
    m, _ = run(1, jd, os.path.join(WORK, "d.h5"), ["sampling.max_new_tokens=128", "engine.max_seqs=1", "engine.threads=2"])
    tps = 1.0 / m["tpot_p50_seconds"]
    floor = bw * 1e9 / weight_bytes
    print(f"decode (batch 1): {tps:.1f} tokens/s; bandwidth floor {floor:.1f} tokens/s; ratio {tps/floor:.2f} (target >= 0.9)")

    # Continuous batching table.
    jb = os.path.join(WORK, "batch.jsonl")
    rows = 16 if QUICK else 64
    few = 8  # max_seqs 1 runs one row at a time: 8 rows give its rate without taking minutes
    write_rows(jb, rows, 128, V)
    jf = os.path.join(WORK, "batch_few.jsonl")
    write_rows(jf, few, 128, V)
    print(f"\nbatching: {rows} rows ({few} at max_seqs 1) x (128 prompt + 128 new tokens); output tokens/s (GEMM GFLOP/s, share of peak)")
    layouts = [("1 rank x 2 threads", 1, ["engine.threads=2"]), ("TP=2", 2, ["parallel.tensor=2"]), ("DP=2", 2, [])]
    print(f"{'layout':<20}" + "".join(f"{'max_seqs ' + str(s):>26}" for s in (1, 8, 32, 64)))
    base = None
    for name, np_, sets in layouts:
        cells = []
        for seqs in (1, 8, 32, 64):
            src = jb if seqs > 1 else jf
            m, _ = run(np_, src, os.path.join(WORK, "b.h5"), sets + ["sampling.max_new_tokens=128", f"engine.max_seqs={seqs}"])
            out_tps = m["output_tokens"] / m["wall_seconds"]
            gf = 2 * matmul_params * (m["output_tokens"] + m["prompt_tokens"]) / m["wall_seconds"] / 1e9
            if name.startswith("1 rank") and seqs == 1:
                base = out_tps
            cells.append(f"{out_tps:8.1f} ({gf:5.1f}, {gf/peak:4.2f})")
        print(f"{name:<20}" + "".join(f"{c:>26}" for c in cells))
    if base:
        print(f"(speed-up target: >= 8x the max_seqs 1 throughput at max_seqs 32; baseline {base:.1f} tokens/s)")

    # Pipeline: TP=2 x PP=2 vs TP=2 x DP=2 on 4 ranks (2 cores: ranks share cores; compare ratios).
    print("\npipeline (4 ranks on 2 cores):")
    for name, sets in [("TP=2 x DP=2", ["parallel.tensor=2"]), ("TP=2 x PP=2", ["parallel.tensor=2", "parallel.pipeline=2"])]:
        m, log = run(4, jb, os.path.join(WORK, "pp.h5"), sets + ["sampling.max_new_tokens=64", "engine.max_seqs=32"])
        busy = re.search(r"busy fraction per stage.*", log)
        print(f"  {name:<14} {m['output_tokens']/m['wall_seconds']:8.1f} output tokens/s  {busy.group(0) if busy else ''}")


if __name__ == "__main__":
    main()
