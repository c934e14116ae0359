#!/usr/bin/env python3
"""An independent reference for Llama-family model folders, following Hugging Face transformers.

Two backends compute the same thing:
  numpy  the forward pass of transformers' modeling_llama / modeling_mistral / modeling_qwen2
         (eager attention) re-written in numpy, in float64; needs only numpy. It shares no code
         with src/ or tests/reference/. This is what the tests use: the PyPI torch wheel is a CUDA
         build that does not import without ~3 GB of nvidia-* wheels (see tests/mpi/
         test_model_families_match_reference.sh).
  hf     transformers itself (torch CPU, float32, attn_implementation="eager"), when importable.
auto (the default) is hf when torch and transformers import, else numpy.

Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM; rope_scaling (or transformers 5's
rope_parameters) none/default, linear, llama3; q/k/v biases (attention_bias, always on for Qwen2); tied or untied embeddings;
sliding-window attention (Mistral's sliding_window; Qwen2's use_sliding_window from layer
max_window_layers on). Anything else is refused with a message naming it.

Greedy decoding never stops early: eos is ignored (the tests run tpbatch with ignore_eos). It is
done as a plain argmax loop rather than generate(min_new_tokens=N), because min_new_tokens masks
the eos logits to -inf and so changes the greedy choice wherever eos is the argmax.

  hf_reference.py generate MODEL --ids 1,2,3 [--ids ...] --max-new-tokens N
      one JSON object per --ids: {"tokens": [...], "logprobs": [...]} (logprobs = log-softmax at
      the chosen tokens)
  hf_reference.py check RESULTS.h5 --model MODEL --max-new-tokens N [--tol 1e-4] [--expect-rows R]
                        [--cpp-reference BIN] [--stop-at-eos]
      every row's /output_tokens equal the reference's greedy tokens and /output_logprobs are within
      --tol; prints the max |logprob difference| over all rows. --stop-at-eos: the file was made
      without ignore_eos, so each row must be the reference's tokens up to and including the first
      of the model's eos ids (finish_reason eos), or all of them (length). --cpp-reference: also
      compare this reference with tests/reference/tpbatch_reference on every row.
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys

import numpy as np

SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")


class Unsupported(Exception):
    pass


# ---- model folder ---------------------------------------------------------------------------------

def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_safetensors(path, out):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[b:e]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2")
        elif dt == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F64":
            a = np.frombuffer(raw, dtype="<f8")
        else:
            raise Unsupported(f"{path}: tensor {name}: dtype {dt}")
        out[name] = a.astype(np.float64).reshape(info["shape"])


def load_weights(model_dir):
    w = {}
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        for shard in sorted(set(read_json(index)["weight_map"].values())):
            read_safetensors(os.path.join(model_dir, shard), w)
    else:
        read_safetensors(os.path.join(model_dir, "model.safetensors"), w)
    return w


def eos_ids(model_dir):
    ids = []
    for name in ("config.json", "generation_config.json"):
        p = os.path.join(model_dir, name)
        if not os.path.exists(p):
            continue
        v = read_json(p).get("eos_token_id")
        for x in (v if isinstance(v, list) else [] if v is None else [v]):
            if x not in ids:
                ids.append(int(x))
    return ids


# ---- numpy backend: transformers' math ------------------------------------------------------------

class NumpyModel:
    def __init__(self, model_dir):
        c = read_json(os.path.join(model_dir, "config.json"))
        arch = (c.get("architectures") or [None])[0]
        if arch not in SUPPORTED:
            raise Unsupported(f"architecture {arch!r}")
        if c.get("hidden_act", "silu") != "silu":
            raise Unsupported(f"hidden_act {c['hidden_act']!r}")
        if c.get("mlp_bias", False):
            raise Unsupported("mlp_bias")
        self.arch = arch
        self.H = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or self.H // self.nh
        self.L = c["num_hidden_layers"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.w = load_weights(model_dir)
        self.tied = c.get("tie_word_embeddings", False) or "lm_head.weight" not in self.w
        # Qwen2's q/k/v always carry biases (o_proj none); Llama's q/k/v/o when attention_bias.
        self.bias = True if arch == "Qwen2ForCausalLM" else bool(c.get("attention_bias", False))
        self.inv_freq = rope_inv_freq(c, self.hd)
        # Per-layer sliding window (None = full causal attention).
        self.window = [None] * self.L
        if arch == "MistralForCausalLM" and c.get("sliding_window"):
            self.window = [int(c["sliding_window"])] * self.L
        elif arch == "Qwen2ForCausalLM" and c.get("use_sliding_window") and c.get("sliding_window"):
            first = c.get("max_window_layers", 0) or 0
            self.window = [int(c["sliding_window"]) if i >= first else None for i in range(self.L)]
        if c.get("layer_types"):
            self.window = [int(c["sliding_window"]) if t == "sliding_attention" else None for t in c["layer_types"]]

    @staticmethod
    def rmsnorm(x, weight, eps):
        return weight * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))

    def rope(self, x, positions):
        # x: [heads, T, hd]; HF: q*cos + rotate_half(q)*sin, emb = cat(freqs, freqs).
        freqs = np.outer(positions, self.inv_freq)  # [T, hd/2]
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb), np.sin(emb)
        h = self.hd // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
        return x * cos + rot * sin

    def logits(self, ids):
        """Logits at every position of ids (teacher-forced), [T, vocab]."""
        w, T, hd = self.w, len(ids), self.hd
        x = w["model.embed_tokens.weight"][np.asarray(ids)]
        pos = np.arange(T, dtype=np.float64)
        qi, kj = np.arange(T)[:, None], np.arange(T)[None, :]
        for l in range(self.L):
            p = f"model.layers.{l}."
            h = self.rmsnorm(x, w[p + "input_layernorm.weight"], self.eps)
            q = h @ w[p + "self_attn.q_proj.weight"].T
            k = h @ w[p + "self_attn.k_proj.weight"].T
            v = h @ w[p + "self_attn.v_proj.weight"].T
            if self.bias:
                q = q + w[p + "self_attn.q_proj.bias"]
                k = k + w[p + "self_attn.k_proj.bias"]
                v = v + w[p + "self_attn.v_proj.bias"]
            q = self.rope(q.reshape(T, self.nh, hd).transpose(1, 0, 2), pos)
            k = self.rope(k.reshape(T, self.nkv, hd).transpose(1, 0, 2), pos)
            v = v.reshape(T, self.nkv, hd).transpose(1, 0, 2)
            rep = self.nh // self.nkv  # repeat_kv
            k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
            s = q @ k.transpose(0, 2, 1) * hd ** -0.5
            allowed = kj <= qi
            if self.window[l] is not None:  # transformers: kv_idx > q_idx - sliding_window
                allowed = allowed & (kj > qi - self.window[l])
            s = np.where(allowed[None], s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(T, self.nh * hd)
            o = a @ w[p + "self_attn.o_proj.weight"].T
            if self.bias and self.arch == "LlamaForCausalLM":  # Llama's attention_bias covers o_proj too
                if p + "self_attn.o_proj.bias" not in w:
                    raise Unsupported(f"attention_bias without {p}self_attn.o_proj.bias (transformers would "
                                      "initialize it randomly)")
                o = o + w[p + "self_attn.o_proj.bias"]
            x = x + o
            h = self.rmsnorm(x, w[p + "post_attention_layernorm.weight"], self.eps)
            g = h @ w[p + "mlp.gate_proj.weight"].T
            u = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1.0 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        x = self.rmsnorm(x, w["model.norm.weight"], self.eps)
        head = w["model.embed_tokens.weight"] if self.tied else w["lm_head.weight"]
        return x @ head.T


def rope_inv_freq(c, dim):
    # transformers >= 5 saves rope_parameters {rope_type, rope_theta, factor, ...} instead of the
    # top-level rope_theta and rope_scaling that earlier versions write.
    rp = c.get("rope_parameters") or {}
    base = rp.get("rope_theta", c.get("rope_theta", 10000.0))
    inv = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    rs = rp or c.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / rs["factor"]
    if kind == "llama3":  # transformers' _compute_llama3_parameters
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, scaled)
    raise Unsupported(f"rope_scaling type {kind!r}")


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


# ---- hf backend ------------------------------------------------------------------------------------

class HFModel:
    def __init__(self, model_dir):
        import torch
        from transformers import AutoModelForCausalLM
        self.torch = torch
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
        try:  # transformers >= 4.56 calls it dtype; torch_dtype is deprecated
            self.m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
        except TypeError:
            self.m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32,
                                                          attn_implementation="eager")
        self.m.eval()

    def logits(self, ids):
        with self.torch.no_grad():
            out = self.m(self.torch.tensor([ids], dtype=self.torch.long), use_cache=False).logits[0]
        return out.double().numpy()


def hf_available():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        return True
    except Exception:
        return False


def open_model(model_dir, backend):
    if backend == "auto":
        backend = "hf" if hf_available() else "numpy"
    return (HFModel if backend == "hf" else NumpyModel)(model_dir), backend


def greedy(model, prompt, n):
    """Greedy continuation of n tokens (eos ignored) and the logprob of each chosen token."""
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(model.logits(ids)[-1])))  # argmax: ties go to the lowest id
    out = ids[len(prompt):]
    if not out:
        return out, []
    lp = log_softmax(model.logits(ids[:-1])[len(prompt) - 1:])
    return out, [float(lp[i, t]) for i, t in enumerate(out)]


# ---- commands ---------------------------------------------------------------------------------------

def parse_ids(text):
    return [int(x) for x in text.split(",") if x.strip()]


def cmd_generate(a):
    model, _ = open_model(a.model, a.backend)
    for text in a.ids:
        toks, lps = greedy(model, parse_ids(text), a.max_new_tokens)
        print(json.dumps({"tokens": toks, "logprobs": lps}))


def cpp_reference(binary, model_dir, prompt, n, toks):
    ids = ",".join(map(str, prompt))
    got = [int(x) for x in subprocess.run([binary, model_dir, "--ids", ids, "--max-new-tokens", str(n)],
                                          check=True, capture_output=True, text=True).stdout.split()]
    full = ",".join(map(str, prompt + toks))
    lps = [float(x) for x in subprocess.run([binary, model_dir, "--ids", full, "--score", "--targets-from",
                                             str(len(prompt))], check=True, capture_output=True,
                                            text=True).stdout.split()]
    return got, np.asarray(lps)


def cmd_check(a):
    import h5py
    model, backend = open_model(a.model, a.backend)
    eos = eos_ids(a.model)
    f = h5py.File(a.results, "r")
    n = f["done"].shape[0]
    if a.expect_rows >= 0 and n != a.expect_rows:
        sys.exit(f"expected {a.expect_rows} rows, file has {n}")
    if f.attrs["complete"] != 1:
        sys.exit("results file not complete")
    bad, worst, worst_cpp, compared, eos_rows, refused = 0, 0.0, 0.0, 0, 0, 0
    for i in range(n):
        rid = f["id"][i].decode()
        reason = f["finish_reason"][i].decode()
        if f["done"][i] != 1:
            print(f"row {i} ({rid}): not done"); bad += 1; continue
        if reason == "error":
            err = f["error"][i].decode()
            if a.refusal and re.search(a.refusal, err) and rid not in a.must_not_refuse.split(","):
                print(f"row {i} ({rid}): refused: {err}"); refused += 1; continue
            print(f"row {i} ({rid}): error: {err}"); bad += 1; continue
        prompt = [int(x) for x in f["prompt_tokens"][i]]
        got = [int(x) for x in f["output_tokens"][i]]
        got_lp = np.asarray(f["output_logprobs"][i], dtype=np.float64)
        want, want_lp = greedy(model, prompt, a.max_new_tokens)
        want_lp = np.asarray(want_lp)
        if a.stop_at_eos:
            cut = next((j + 1 for j, t in enumerate(want) if t in eos), None)
            if cut is not None:
                want, want_lp = want[:cut], want_lp[:cut]
                eos_rows += 1
            want_reason = "eos" if cut is not None else "length"
            if reason != want_reason:
                print(f"row {i} ({rid}): finish_reason {reason}, want {want_reason} (eos ids {eos})"); bad += 1
                continue
        if got != want:
            print(f"row {i} ({rid}): tokens differ\n  got  {got}\n  want {want}"); bad += 1; continue
        if len(got_lp) != len(want):
            print(f"row {i} ({rid}): {len(got_lp)} logprobs for {len(want)} tokens"); bad += 1; continue
        d = float(np.max(np.abs(got_lp - want_lp))) if want else 0.0
        worst = max(worst, d)
        if d > a.tol:
            print(f"row {i} ({rid}): logprobs differ by {d:.3g} (tolerance {a.tol:g})"); bad += 1; continue
        if a.cpp_reference and not a.stop_at_eos:
            ctoks, clp = cpp_reference(a.cpp_reference, a.model, prompt, a.max_new_tokens, want)
            dc = float(np.max(np.abs(clp - want_lp))) if want else 0.0
            worst_cpp = max(worst_cpp, dc)
            compared += 1
            if ctoks != want or dc > a.tol:
                print(f"row {i} ({rid}): tpbatch_reference disagrees with the {backend} reference "
                      f"(tokens equal: {ctoks == want}, max |logprob diff| {dc:.3g})"); bad += 1
    print(f"{backend} reference: {n - bad - refused}/{n} rows match; max |logprob diff| {worst:.3g} "
          f"(tolerance {a.tol:g})" + (f"; {refused} rows refused" if a.refusal else "")
          + (f"; {eos_rows} rows end at an eos id {eos}" if a.stop_at_eos else ""))
    if a.cpp_reference and compared:
        print(f"tpbatch_reference vs {backend} reference on {compared} rows: max |logprob diff| {worst_cpp:.3g}")
    if a.stop_at_eos and eos_rows < a.min_eos_rows:
        print(f"only {eos_rows} rows end at an eos id, want at least {a.min_eos_rows}"); bad += 1
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("auto", "numpy", "hf"), default="auto")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("model")
    g.add_argument("--ids", action="append", required=True)
    g.add_argument("--max-new-tokens", type=int, default=16)
    c = sub.add_parser("check")
    c.add_argument("results")
    c.add_argument("--model", required=True)
    c.add_argument("--max-new-tokens", type=int, default=16)
    c.add_argument("--tol", type=float, default=1e-4)
    c.add_argument("--expect-rows", type=int, default=-1)
    c.add_argument("--cpp-reference")
    c.add_argument("--stop-at-eos", action="store_true")
    c.add_argument("--refusal", help="regex: error rows whose /error matches count as refused, not failed")
    c.add_argument("--must-not-refuse", default="", help="with --refusal: comma-separated row ids that must match")
    c.add_argument("--min-eos-rows", type=int, default=0, help="with --stop-at-eos: at least this many rows end at eos")
    a = ap.parse_args()
    try:
        (cmd_generate if a.cmd == "generate" else cmd_check)(a)
    except Unsupported as e:
        sys.exit(f"hf_reference: unsupported: {e}")


if __name__ == "__main__":
    main()
