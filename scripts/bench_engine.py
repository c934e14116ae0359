#!/usr/bin/env python3
"""The engine benchmark table on the ~125M generated model (CPU backend), each row against its bound
measured in the same run (read bandwidth and fp32 GEMM peak at 1 and 2 threads, tpbatch_machine_bench),
and, when LLAMA_CPP_BIN names a llama.cpp build folder, llama-bench / llama-batched-bench on the same
weights converted to GGUF, with the ratios.

Rows (tpbatch side):
  F32 decode, 1 sequence, 1 thread             tok/s vs the read-bandwidth floor (bw / weight bytes)
  F32 32 sequences x (128 prompt + 128 new)     generated tok/s, best of 1 rank x 2 threads / TP=2 / DP=2
  BF16 decode, 1 sequence, 1 and 2 threads      vs the bf16 floor (half the bytes)
  BF16 32 x (128 + 128)                         as the F32 row, bf16 checkpoint
  FP8 decode, 1 sequence, 1 and 2 threads       fp8-block projections (bf16 embeddings / LM head), vs
                                                its floor, and its speed-up over the BF16 row
  INT8 decode, 1 sequence, 1 and 2 threads      int8 W8A8 projections (per-channel scales, x quantized
                                                per token), the same way
  INT4 decode, 1 sequence, 1 and 2 threads      awq (group 128) projections, the same way
  decode throughput, 16 sequences vs 1, 1 thread ratio vs the ratio the bounds allow
  prefill, 512-token prompts, 1 thread          GEMM rate as a share of the 1-thread GEMM peak
The 32 x (128+128) bound: prefill FLOPs / peak + 128 steps of max(weights / bw, step FLOPs / peak).

llama.cpp (optional): LLAMA_CPP_BIN=/path/to/llama.cpp/build (binaries in it or in its bin/);
LLAMA_CPP_SRC (default: the build folder's parent) holds convert_hf_to_gguf.py, which needs a python
with numpy, torch, safetensors, sentencepiece, transformers (LLAMA_CPP_PYTHON names it, default this
python; llama.cpp's gguf-py is put on PYTHONPATH). A torch older than 2.1 lacks the float8 dtypes the
converter names in a table; they are stubbed (this model has none). In the same run the weights are
converted to F32 and BF16 GGUF, the BF16 one quantized by llama-quantize to Q8_0 and Q4_0 (the formats
comparable to int8 / fp8 and 4-bit; --leave-output-tensor keeps the LM head bf16, as in the tpbatch
checkpoints, so both read the same bytes per step), then llama-bench (tg128 at 1 and 2 threads, pp512
at 1 thread) and llama-batched-bench -fa (32 x (128 + new), 2 threads) run on each, and the ratios
are printed.
Every number is printed with the 1-minute load average when it was taken (the cores are shared).

At the end, the one-sequence decode rows again, tpbatch and llama-bench taking turns on each pair of
weights (best of 3 each), so a burst of others' work on shared cores or memory hits both sides.

Usage: scripts/bench_engine.sh [BUILD_DIR] [--quick | --pairs]
  --quick: fewer rows and tokens, same table; --pairs: only the taking-turns decode rows
"""
import glob
import json
import os
import random
import subprocess
import sys

import h5py

BUILD = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build"
QUICK = "--quick" in sys.argv
PAIRS_ONLY = "--pairs" in sys.argv  # only the one-sequence decode rows against llama.cpp, taking turns
TP = os.path.join(BUILD, "tpbatch")
WORK = os.path.join(BUILD, "bench")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
NEW = 64 if QUICK else 128       # new tokens per row in the batched rows
DECODE_NEW = 64 if QUICK else 128


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=ENV, **kw)


def machine(threads):
    out = sh([os.path.join(BUILD, "benchmarks", "tpbatch_machine_bench"), "--threads", str(threads)]).stdout
    vals = dict(line.split(None, 1) for line in out.strip().splitlines())
    return dict(core=vals["blas_core"].strip(), peak=float(vals["gemm_gflops"]), bw=float(vals["read_gbps"]))


def write_rows(path, rows, prompt_len, vocab):
    rnd = random.Random(1)
    with open(path, "w") as f:
        for i in range(rows):
            f.write(json.dumps(dict(id=f"r{i}", ids=[rnd.randrange(3, vocab) for _ in range(prompt_len)])) + "\n")


def run(model, np_, jsonl, sets):
    job = os.path.join(WORK, "job.yaml")
    out = os.path.join(WORK, "out.h5")
    with open(job, "w") as f:
        f.write(f"model: {model}\ninput:\n  path: {jsonl}\n  tokens_field: ids\noutput:\n  path: {out}\n"
                f"  if_exists: overwrite\n  logprobs: false\nsampling:\n  ignore_eos: true\n")
    args = [TP, job] + [a for s in sets for a in ("--set", s)]
    if np_ > 1:
        args = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none"] + args
    subprocess.run(args, check=True, capture_output=True, text=True, env=ENV)
    with h5py.File(out) as h:
        return dict(h["metrics"].attrs)


def load1():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def row(name, value, bound_text, ratio_text, goal):
    print(f"| {name} | {value} | {bound_text} | {ratio_text} | {goal} | {load1()} |", flush=True)


# Runs convert_hf_to_gguf.py (argv[1:]) with torch's float8 dtypes stubbed when this torch predates them.
CONVERT_SHIM = ("import runpy, sys, torch\n"
                "for n in ('float8_e4m3fn', 'float8_e5m2'):\n"
                "    hasattr(torch, n) or setattr(torch, n, torch.uint8)\n"
                "sys.argv = sys.argv[1:]\n"
                "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def llama_tools():
    """The llama.cpp binaries and converter, or None with the reason printed."""
    bin_dir = os.environ.get("LLAMA_CPP_BIN")
    if not bin_dir:
        print("llama.cpp: LLAMA_CPP_BIN is not set: no llama.cpp columns (point it at a llama.cpp build folder)")
        return None
    tools = {}
    for name in ("llama-bench", "llama-batched-bench", "llama-quantize"):
        found = [c for c in (os.path.join(bin_dir, name), os.path.join(bin_dir, "bin", name)) if os.access(c, os.X_OK)]
        if not found:
            print(f"llama.cpp: {name} not found in {bin_dir} or {bin_dir}/bin")
            return None
        tools[name] = found[0]
    tools["src"] = os.environ.get("LLAMA_CPP_SRC", os.path.dirname(os.path.abspath(bin_dir)))
    tools["python"] = os.environ.get("LLAMA_CPP_PYTHON", sys.executable)
    return tools


def llama_failed(e):
    detail = getattr(e, "stderr", "") or ""
    print(f"llama.cpp: failed ({e}); {detail.strip().splitlines()[-1] if detail.strip() else ''}")
    print("  (convert_hf_to_gguf.py needs numpy, torch, safetensors, sentencepiece, transformers and gguf-py)")


def convert_ggufs(tools, models):
    """GGUF files of the same weights, converted in this run: {"f32", "bf16", "q8_0", "q4_0": path}."""
    convert = os.path.join(tools["src"], "convert_hf_to_gguf.py")
    env = dict(ENV, PYTHONPATH=os.path.join(tools["src"], "gguf-py") + os.pathsep + ENV.get("PYTHONPATH", ""))
    ggufs = {}
    for dt, model in models.items():
        gguf = ggufs[dt] = os.path.join(WORK, f"125m-{dt}.gguf")
        if os.path.exists(gguf):
            os.remove(gguf)
        subprocess.run([tools["python"], "-c", CONVERT_SHIM, convert, model, "--outfile", gguf, "--outtype", dt],
                       check=True, capture_output=True, text=True, env=env)
    for q in ("q8_0", "q4_0"):
        ggufs[q] = os.path.join(WORK, f"125m-{q}.gguf")
        sh([tools["llama-quantize"], "--leave-output-tensor", ggufs["bf16"], ggufs[q], q.upper()])
    return ggufs


def llama_decode(tools, gguf, threads, reps):
    """llama-bench's decode rate (tg DECODE_NEW), tokens/s."""
    out = sh([tools["llama-bench"], "-m", gguf, "-n", str(DECODE_NEW), "-p", "0", "-t", str(threads), "-r", str(reps),
              "-o", "json"]).stdout
    return json.loads(out)[0]["avg_ts"]


def llama_cpp(tools, ggufs):
    """llama.cpp numbers on the same weights, or None with the reason printed."""
    res = {}
    try:
        reps = "2" if QUICK else "4"
        for dt, gguf in ggufs.items():
            for t in (1, 2):
                # Decode (tg) at 1 and 2 threads; prefill pp512 at 1 thread (the tpbatch row's setting).
                args = [tools["llama-bench"], "-m", gguf, "-n", str(DECODE_NEW), "-t", str(t), "-r", reps, "-o", "json"]
                args += ["-p", "512"] if t == 1 else ["-p", "0"]
                out = sh(args).stdout
                for e in json.loads(out):
                    kind = "pp" if e.get("n_prompt", 0) > 0 else "tg"
                    res[(dt, kind, t)] = (e["avg_ts"], load1())
            n_ctx = 32 * (128 + NEW) + 512
            base = [tools["llama-batched-bench"], "-m", gguf, "-c", str(n_ctx), "-b", "2048", "-ub", "512", "-npp",
                    "128", "-ntg", str(NEW), "-npl", "32", "-t", "2", "--output-format", "jsonl"]
            try:
                out = sh(base + ["-fa"]).stdout
            except subprocess.CalledProcessError:
                out = sh(base + ["-fa", "on"]).stdout  # newer builds take a value
            lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            last = lines[-1]
            # S_TG (decode only) and generated tokens / (prefill + decode time), like the tpbatch wall rate.
            res[(dt, "batched_tg", 2)] = (last["speed_tg"], load1())
            res[(dt, "batched_wall", 2)] = (last["pl"] * last["tg"] / last["t"], load1())
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError, IndexError) as e:
        llama_failed(e)
        return None
    return res


# The quantized checkpoints meet the comparable GGUF format: int8 W8A8 and fp8 against Q8_0,
# 4-bit against Q4_0. (tpbatch scheme, llama.cpp type, label)
PAIRS = (("f32", "f32", "F32"), ("bf16", "bf16", "BF16"), ("int8", "q8_0", "INT8 vs Q8_0"),
         ("fp8", "q8_0", "FP8 vs Q8_0"), ("int4", "q4_0", "INT4 (awq) vs Q4_0"))


def decode_pairs(decode, tools, ggufs, rounds=3):
    """One-sequence decode, tpbatch and llama-bench taking turns on the same weights, best of
    `rounds` each: on cores and memory shared with others' work, a burst of theirs then hits both
    sides alike instead of one table's rows minutes apart."""
    print(f"\n| one-sequence decode, taking turns, best of {rounds} | llama.cpp | tpbatch | tpbatch / llama.cpp | goal |")
    print("| --- | --- | --- | --- | --- |")
    for ours, theirs, name in PAIRS:
        for t in (1, 2):
            lc = tp = 0.0
            for _ in range(rounds):
                lc = max(lc, llama_decode(tools, ggufs[theirs], t, 1))
                tp = max(tp, decode(ours, t))
            print(f"| {name}, {t} thread{'s' if t > 1 else ''} | {lc:.1f} tok/s | {tp:.1f} tok/s | {tp/lc:.2f} | >= 1 |",
                  flush=True)


def main():
    os.makedirs(WORK, exist_ok=True)
    models = {"f32": os.path.join(WORK, "125m"), "bf16": os.path.join(WORK, "125m-bf16")}
    for dt, path in models.items():
        if not os.path.exists(os.path.join(path, "model.safetensors")):
            sh([TP, "make-model", path, "--preset", "125m", "--dtype", "float32" if dt == "f32" else "bfloat16"])
    # Not in `models`: llama.cpp's rows convert those to GGUF.
    extra_models = {"fp8": os.path.join(WORK, "125m-fp8-block"), "int8": os.path.join(WORK, "125m-int8"),
                    "int4": os.path.join(WORK, "125m-awq")}
    for name, scheme in (("fp8", "fp8-block"), ("int8", "int8"), ("int4", "awq")):
        if not os.path.exists(os.path.join(extra_models[name], "model.safetensors")):
            sh([TP, "make-model", extra_models[name], "--preset", "125m", "--dtype", "bfloat16", "--quantize", scheme])
    cfg = json.load(open(os.path.join(models["f32"], "config.json")))
    H, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    hd = H // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    params = L * (H * H + 2 * kv * H + H * H + 3 * H * I) + V * H  # matmul weights read per decode step
    m1, m2 = machine(1), machine(2)
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = ["?"] * 3
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(load)} (others' work shares these cores)")
    print(f"bounds: read bandwidth {m1['bw']:.1f} GB/s (1 thread) / {m2['bw']:.1f} GB/s (2); fp32 GEMM peak "
          f"{m1['peak']:.1f} / {m2['peak']:.1f} GFLOP/s (OpenBLAS core {m2['core']})")
    print(f"model: 125M-shaped, {params/1e6:.1f}M matmul parameters: {4*params/2**20:.0f} MiB f32, "
          f"{2*params/2**20:.0f} MiB bf16 read per decode step\n")

    # Weight bytes read per decode step. The quantized projections' embedding / LM head stay bf16.
    # fp8: one byte per weight plus an F32 scale per 128x128 block (one per output row and block);
    # int8 W8A8: one byte plus an F32 scale per output row; 4-bit: half a byte plus an F32 scale
    # and zero point per 128.
    head = V * H
    step_bytes = {"f32": 4 * params, "bf16": 2 * params, "fp8": (params - head) * (1 + 4 / 128) + 2 * head,
                  "int8": (params - head) + 2 * head, "int4": (params - head) * (0.5 + 8 / 128) + 2 * head}

    def floor(m, bytes_per):  # decode tokens/s if the weights stream at read bandwidth
        return m["bw"] * 1e9 / (bytes_per * params)

    jd = os.path.join(WORK, "decode1.jsonl")
    write_rows(jd, 1, 16, V)
    jd16 = os.path.join(WORK, "decode16.jsonl")
    write_rows(jd16, 16, 16, V)
    rows32 = 32
    jb = os.path.join(WORK, "batch32.jsonl")
    write_rows(jb, rows32, 128, V)
    jp = os.path.join(WORK, "prefill.jsonl")
    write_rows(jp, 2 if QUICK else 4, 512, V)
    results = {}
    def decode(dt, threads, jsonl=jd, seqs=1):
        m = run(models.get(dt) or extra_models[dt], 1, jsonl, [f"sampling.max_new_tokens={DECODE_NEW}", f"engine.max_seqs={seqs}",
                                       f"engine.threads={threads}"])
        return seqs / m["tpot_p50_seconds"]

    if PAIRS_ONLY:
        tools = llama_tools()
        try:
            if tools:
                decode_pairs(decode, tools, convert_ggufs(tools, models))
        except (OSError, subprocess.CalledProcessError, KeyError, ValueError, IndexError) as e:
            llama_failed(e)
        return

    print("| workload | tpbatch | bound (same run) | share of bound | goal | load |")
    print("| --- | --- | --- | --- | --- | --- |")

    def batched(dt):
        best, best_name = 0.0, ""
        for name, np_, sets in [("1 rank x 2 threads", 1, ["engine.threads=2"]), ("TP=2", 2, ["parallel.tensor=2"]),
                                ("DP=2", 2, [])]:
            m = run(models.get(dt) or extra_models[dt], np_, jb,
                    sets + [f"sampling.max_new_tokens={NEW}", f"engine.max_seqs={rows32}"])
            tps = m["output_tokens"] / m["wall_seconds"]
            if tps > best:
                # Decode only, as llama-batched-bench's S_TG: all 32 rows decode together, one token each
                # per step of tpot seconds.
                best, best_name, best_decode = tps, name, rows32 / m["tpot_p50_seconds"]
        step = max(step_bytes[dt] / (m2["bw"] * 1e9), 2 * params * rows32 / (m2["peak"] * 1e9))
        t_bound = 2 * params * rows32 * 128 / (m2["peak"] * 1e9) + NEW * step
        return best, best_name, rows32 * NEW / t_bound, best_decode

    for t, m in ((1, m1), (2, m2)):
        tps = decode("f32", t)
        results[("f32", "tg", t)] = tps
        fl = floor(m, 4)
        row(f"F32, one sequence, decode, {t} thread{'s' if t > 1 else ''}", f"{tps:.1f} tok/s",
            f"{fl:.1f} tok/s floor", f"{tps/fl:.2f}", ">= 0.9" if t == 1 else ">= llama.cpp")

    best, name, bnd, dec = batched("f32")
    results[("f32", "batched_wall", 2)] = best
    results[("f32", "batched_tg", 2)] = dec
    row(f"F32, 32 sequences x (128 + {NEW}), both cores", f"{best:.1f} tok/s generated ({name})",
        f"{bnd:.0f} tok/s", f"{best/bnd:.2f}", ">= 2x llama.cpp")

    for t, m in ((1, m1), (2, m2)):
        tps = decode("bf16", t)
        results[("bf16", "tg", t)] = tps
        fl = floor(m, 2)
        row(f"BF16, one sequence, decode, {t} thread{'s' if t > 1 else ''}", f"{tps:.1f} tok/s",
            f"{fl:.1f} tok/s floor", f"{tps/fl:.2f}", ">= llama.cpp")

    def quantized_decode(scheme, label, goal, also_fp8=False):
        """One-sequence decode of a quantized model at 1 and 2 threads, against BF16 and its floor."""
        for t, m in ((1, m1), (2, m2)):
            tps = decode(scheme, t)
            results[(scheme, "tg", t)] = tps
            weight_bytes = step_bytes[scheme]
            fl = m["bw"] * 1e9 / weight_bytes
            bf = results[("bf16", "tg", t)]
            vs = f"{tps/bf:.2f}x BF16" + (f", {tps/results[('fp8', 'tg', t)]:.2f}x FP8" if also_fp8 else "")
            row(f"{label}, one sequence, decode, {t} thread{'s' if t > 1 else ''}",
                f"{tps:.1f} tok/s ({vs}; at most {2*params/weight_bytes:.2f}x BF16 with a bf16 LM head)",
                f"{fl:.1f} tok/s floor", f"{tps/fl:.2f}", goal)

    quantized_decode("fp8", "FP8 (128x128 blocks)", ">= 1.8x BF16")
    quantized_decode("int8", "INT8 W8A8 (per channel)", ">= 1.8x BF16")
    quantized_decode("int4", "INT4 (awq, groups of 128)", ">= 3x BF16", also_fp8=True)

    for dt in ("bf16", "int8", "int4"):
        best, name, bnd, dec = batched(dt)
        results[(dt, "batched_wall", 2)] = best
        results[(dt, "batched_tg", 2)] = dec
        row(f"{dt.upper()}, 32 sequences x (128 + {NEW})", f"{best:.1f} tok/s generated ({name})", f"{bnd:.0f} tok/s",
            f"{best/bnd:.2f}", ">= 2x llama.cpp")

    one = results[("f32", "tg", 1)]
    sixteen = decode("f32", 1, jd16, 16)
    t1 = max(4 * params / (m1["bw"] * 1e9), 2 * params / (m1["peak"] * 1e9))
    t16 = max(4 * params / (m1["bw"] * 1e9), 2 * params * 16 / (m1["peak"] * 1e9))
    # Where one sequence decodes faster than the read-bandwidth floor, the compute bound of 16 caps the
    # ratio lower than the bound column says: 16 rows at the fp32 GEMM peak, over the measured one.
    cap = m1["peak"] * 1e9 / (2 * params) / one
    row("decode throughput, 16 sequences vs 1, 1 thread (F32)",
        f"{sixteen/one:.1f}x ({sixteen:.0f} tok/s; at most {cap:.1f}x at the fp32 peak over this one-sequence rate)",
        f"{16*t1/t16:.1f}x", f"{(sixteen/one)/(16*t1/t16):.2f}", ">= 8x")

    for dt in ("f32", "bf16", "int8", "int4"):
        m = run(models.get(dt) or extra_models[dt], 1, jp, ["sampling.max_new_tokens=1", "engine.max_seqs=4", "engine.threads=1"])
        rate = m["prompt_tokens"] / m["wall_seconds"]
        results[(dt, "pp", 1)] = rate
        gf = 2 * params * rate / 1e9
        row(f"prefill, 512-token prompts, 1 thread ({dt.upper()})", f"{rate:.0f} tok/s ({gf:.1f} GFLOP/s)",
            f"{m1['peak']:.1f} GFLOP/s peak", f"{gf/m1['peak']:.2f}", ">= 0.6 of peak")
    print("(generated tok/s of the 32-sequence rows = output tokens / wall time, prefill and start-up included;"
          " load = 1-minute load average when the row finished)")

    tools = llama_tools()
    if not tools:
        return
    try:
        ggufs = convert_ggufs(tools, models)
    except (OSError, subprocess.CalledProcessError) as e:
        llama_failed(e)
        return
    lc = llama_cpp(tools, ggufs)
    if lc:
        print(f"\n| workload (same weights, same run) | llama.cpp | load | tpbatch | tpbatch / llama.cpp | goal |")
        print("| --- | --- | --- | --- | --- | --- |")
        pairs = []
        for ours, theirs, name in PAIRS:
            pairs += [((ours, "tg", t), (theirs, "tg", t), f"{name} decode, {t} thread{'s' if t > 1 else ''}"
                       + (f" (llama-bench tg{DECODE_NEW})" if ours == "f32" and t == 1 else ""), ">= 1")
                      for t in (1, 2)]
            if ours != "fp8":
                pairs += [((ours, "batched_tg", 2), (theirs, "batched_tg", 2),
                           f"{name} 32 x (128+{NEW}), 2 threads, decode only (batched-bench -fa S_TG; tpbatch 32 / "
                           "tpot p50)", ">= 2"),
                          ((ours, "batched_wall", 2), (theirs, "batched_wall", 2),
                           f"{name} 32 x (128+{NEW}), generated / (prefill + decode) time", ">= 2"),
                          ((ours, "pp", 1), (theirs, "pp", 1), f"{name} prefill, 512-token prompts, 1 thread "
                           "(llama-bench pp512)", "-")]
        for ours, theirs, label, goal in pairs:
            if ours in results and theirs in lc:
                v, ld = lc[theirs]
                print(f"| {label} | {v:.1f} tok/s | {ld} | {results[ours]:.1f} tok/s | {results[ours]/v:.2f} | {goal} |")
    try:
        decode_pairs(decode, tools, ggufs)
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError, IndexError) as e:
        llama_failed(e)


if __name__ == "__main__":
    main()
