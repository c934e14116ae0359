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

Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (modeling_qwen3:
per-head q/k RMSNorm before RoPE), Phi3ForCausalLM (modeling_phi3: fused qkv_proj / gate_up_proj),
GemmaForCausalLM (modeling_gemma: (1 + weight) RMSNorms, sqrt(hidden) embedding scale, GeLU-tanh MLP
from hidden_activation, gelu_pytorch_tanh when it is absent, as transformers 4.46 reads it),
Gemma2ForCausalLM and Gemma3ForCausalLM (modeling_gemma2 / modeling_gemma3 text part: Gemma's block
plus sandwich norms, query_pre_attn_scalar,
attention and final logit soft-capping, alternating sliding/global layers, Gemma 3's local rope
base), MixtralForCausalLM, Qwen3MoeForCausalLM and Qwen2MoeForCausalLM (modeling_mixtral /
modeling_qwen3_moe / modeling_qwen2_moe: softmax router, top-k experts renormalised (Mixtral always,
Qwen-MoE per norm_topk_prob), Qwen-MoE's dense layers by decoder_sparse_step / mlp_only_layers,
Qwen2-MoE's sigmoid-gated shared expert and q/k/v biases); rope_scaling (or transformers 5's rope_parameters) none/default, linear, llama3, yarn
(attention factor / mscale), dynamic (within max_position_embeddings, where it is the default rope),
longrope/su (short factors while the sequence is within original_max_position_embeddings, the long
factors for every position of a longer one, as transformers 4.46's Phi3LongRoPEScaledRotaryEmbedding
and later versions' longrope_frequency_update choose them from max(position_ids) + 1: each forward
here is over the whole sequence, no cache, so that length is the sequence's); q/k/v biases
(attention_bias, always on for Qwen2); Llama's mlp_bias; tied or untied embeddings; sliding-window
attention (Mistral's and Phi-3's sliding_window; Qwen2's use_sliding_window from layer
max_window_layers on; Gemma's per-layer pattern or layer_types). Anything else is refused with a
message naming it.

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
  hf_reference.py score-check RESULTS.h5 --model MODEL [--tol 1e-4] [--expect-rows R]
      a score job's rows: /output_logprobs of /output_tokens after /prompt_tokens within --tol of
      one forward over the whole row (as lm-eval scores it), /logprob_sum within 5 * --tol,
      /is_greedy from that forward's argmax.
  hf_reference.py embed-check RESULTS.h5 --model MODEL --pooling last|mean|cls --normalize true|false
                        [--tol 1e-4] [--expect-rows R]
      an embed job's /embedding rows against the final-normed hidden states of their
      /prompt_tokens, pooled (cls/last/mean) and L2-normalised as asked; prints the max |diff|.
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

SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Phi3ForCausalLM",
             "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "MixtralForCausalLM",
             "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM")
GEMMA = ("GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM")


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
        gemma = arch in GEMMA
        gemma1 = arch == "GemmaForCausalLM"
        # Gemma's MLP reads hidden_activation (its configs carry hidden_act too); GemmaMLP (4.46)
        # takes gelu_pytorch_tanh when hidden_activation is absent.
        if gemma1:
            self.act = c.get("hidden_activation") or "gelu_pytorch_tanh"
        else:
            self.act = (c.get("hidden_activation") or c.get("hidden_act") or "gelu_pytorch_tanh") if gemma \
                else c.get("hidden_act", "silu")
        if self.act not in ("silu", "gelu_pytorch_tanh"):
            raise Unsupported(f"hidden_act {self.act!r}")
        if c.get("partial_rotary_factor", 1.0) != 1.0:
            raise Unsupported("partial_rotary_factor")
        self.mlp_bias = bool(c.get("mlp_bias", False))
        if self.mlp_bias and arch != "LlamaForCausalLM":
            raise Unsupported(f"mlp_bias on {arch}")
        self.arch = arch
        self.H = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or self.H // self.nh
        self.L = c["num_hidden_layers"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.w = load_weights(model_dir)
        self.tied = c.get("tie_word_embeddings", gemma) or "lm_head.weight" not in self.w
        # Qwen2's q/k/v always carry biases (o_proj none); Llama's q/k/v/o when attention_bias.
        self.bias = True if arch == "Qwen2ForCausalLM" else bool(c.get("qkv_bias", True)) \
            if arch == "Qwen2MoeForCausalLM" else bool(c.get("attention_bias", False))
        self.fused = arch == "Phi3ForCausalLM"
        self.qk_norm = arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Gemma3ForCausalLM")
        self.moe = moe_config(c, arch, self.L)
        self.gemma = gemma
        self.sandwich = gemma and not gemma1  # Gemma 2/3: norms after attention and MLP, and before the MLP
        self.norm_offset = 1.0 if gemma else 0.0  # Gemma's RMSNorm: x_normed * (1 + weight)
        self.scaling = (c.get("query_pre_attn_scalar") or self.hd) ** -0.5 if self.sandwich else self.hd ** -0.5
        self.attn_softcap = c.get("attn_logit_softcapping") if self.sandwich else None
        self.final_softcap = c.get("final_logit_softcapping") if self.sandwich else None
        self.inv_freq, self.attn_factor = rope_inv_freq(c, self.hd)
        self.long_after, self.inv_freq_long = longrope_long_factors(c, self.hd)
        self.inv_freq_local = None  # the sliding layers rotate as the others
        if arch == "Gemma3ForCausalLM":  # rotary_emb_local: rope_local_base_freq, default rope
            base = c.get("rope_local_base_freq", 10000.0)
            self.inv_freq_local = 1.0 / base ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        # Per-layer sliding window (None = full causal attention).
        self.window = [None] * self.L
        if arch in ("MistralForCausalLM", "Phi3ForCausalLM", "MixtralForCausalLM") and c.get("sliding_window"):
            self.window = [int(c["sliding_window"])] * self.L
        elif arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM") \
                and c.get("use_sliding_window") \
                and c.get("sliding_window"):
            first = c.get("max_window_layers", 0) or 0
            self.window = [int(c["sliding_window"]) if i >= first else None for i in range(self.L)]
        elif self.sandwich and c.get("sliding_window"):
            # modeling_gemma2: is_sliding = not bool(layer_idx % 2); modeling_gemma3:
            # is_sliding = bool((layer_idx + 1) % sliding_window_pattern)
            pattern = 2 if arch == "Gemma2ForCausalLM" else c.get("sliding_window_pattern", 6)
            self.window = [int(c["sliding_window"]) if (i + 1) % pattern else None for i in range(self.L)]
        if c.get("layer_types") and not gemma1:
            self.window = [int(c["sliding_window"]) if t == "sliding_attention" else None for t in c["layer_types"]]

    def rmsnorm(self, x, weight, eps):
        return (weight + self.norm_offset) * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))

    def rope(self, x, positions, inv_freq, factor):
        # x: [heads, T, hd]; HF: q*cos + rotate_half(q)*sin, emb = cat(freqs, freqs), cos and sin
        # times the rope type's attention_scaling.
        freqs = np.outer(positions, inv_freq)  # [T, hd/2]
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb) * factor, np.sin(emb) * factor
        h = self.hd // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
        return x * cos + rot * sin

    def act_fn(self, g):
        if self.act == "silu":
            return g / (1.0 + np.exp(-g))
        return 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))

    def sparse_moe(self, h, p):
        """modeling_mixtral's MixtralSparseMoeBlock / modeling_qwen3_moe's Qwen3MoeSparseMoeBlock:
        softmax over the router logits, top-k, renormalised (Mixtral always, Qwen3-MoE when
        norm_topk_prob), each chosen expert's SwiGLU FFN weighted and summed; modeling_qwen2_moe's
        Qwen2MoeSparseMoeBlock adds sigmoid(shared_expert_gate(h)) * shared_expert(h)."""
        m, w = self.moe, self.w
        block = p + ("block_sparse_moe." if self.arch == "MixtralForCausalLM" else "mlp.")
        names = ("w1", "w3", "w2") if self.arch == "MixtralForCausalLM" else ("gate_proj", "up_proj", "down_proj")
        z = h @ w[block + "gate.weight"].T  # [T, experts]
        prob = np.exp(z - z.max(axis=-1, keepdims=True))
        prob /= prob.sum(axis=-1, keepdims=True)
        # torch.topk: the k largest; stable argsort of -prob breaks ties towards the lower expert id.
        top = np.argsort(-prob, axis=-1, kind="stable")[:, :m["top_k"]]
        weight = np.take_along_axis(prob, top, axis=-1)
        if m["renormalise"]:
            weight = weight / weight.sum(axis=-1, keepdims=True)
        out = np.zeros_like(h)
        for e in range(m["experts"]):
            rows, slot = np.nonzero(top == e)
            if len(rows) == 0:
                continue
            x = h[rows]
            ex = f"{block}experts.{e}."
            y = (self.act_fn(x @ w[ex + names[0] + ".weight"].T) * (x @ w[ex + names[1] + ".weight"].T)) \
                @ w[ex + names[2] + ".weight"].T
            np.add.at(out, rows, y * weight[rows, slot][:, None])
        if m["shared"]:
            se = block + "shared_expert."
            y = (self.act_fn(h @ w[se + "gate_proj.weight"].T) * (h @ w[se + "up_proj.weight"].T)) \
                @ w[se + "down_proj.weight"].T
            g = h @ w[block + "shared_expert_gate.weight"].T  # [T, 1]
            out = out + y / (1.0 + np.exp(-g))
        return out

    def logits(self, ids):
        """Logits at every position of ids (teacher-forced), [T, vocab]."""
        w, T, hd = self.w, len(ids), self.hd
        x = w["model.embed_tokens.weight"][np.asarray(ids)]
        if self.gemma:
            x = x * self.H ** 0.5
        pos = np.arange(T, dtype=np.float64)
        # longrope: the long factors for the whole sequence once it is longer than the original context
        inv_global = self.inv_freq_long if self.long_after and T > self.long_after else self.inv_freq
        qi, kj = np.arange(T)[:, None], np.arange(T)[None, :]
        Q, KV = self.nh * hd, self.nkv * hd
        for l in range(self.L):
            p = f"model.layers.{l}."
            h = self.rmsnorm(x, w[p + "input_layernorm.weight"], self.eps)
            if self.fused:  # Phi-3: qkv_proj rows are [q | k | v]
                qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
                q, k, v = qkv[:, :Q], qkv[:, Q:Q + KV], qkv[:, Q + KV:]
            else:
                q = h @ w[p + "self_attn.q_proj.weight"].T
                k = h @ w[p + "self_attn.k_proj.weight"].T
                v = h @ w[p + "self_attn.v_proj.weight"].T
            if self.bias:
                q = q + w[p + "self_attn.q_proj.bias"]
                k = k + w[p + "self_attn.k_proj.bias"]
                v = v + w[p + "self_attn.v_proj.bias"]
            q = q.reshape(T, self.nh, hd).transpose(1, 0, 2)
            k = k.reshape(T, self.nkv, hd).transpose(1, 0, 2)
            if self.qk_norm:  # per head, before RoPE
                q = self.rmsnorm(q, w[p + "self_attn.q_norm.weight"], self.eps)
                k = self.rmsnorm(k, w[p + "self_attn.k_norm.weight"], self.eps)
            if self.window[l] is not None and self.inv_freq_local is not None:
                inv, fac = self.inv_freq_local, 1.0
            else:
                inv, fac = inv_global, self.attn_factor
            q = self.rope(q, pos, inv, fac)
            k = self.rope(k, pos, inv, fac)
            v = v.reshape(T, self.nkv, hd).transpose(1, 0, 2)
            rep = self.nh // self.nkv  # repeat_kv
            k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
            s = q @ k.transpose(0, 2, 1) * self.scaling
            if self.attn_softcap:  # Gemma 2: before the mask
                s = np.tanh(s / self.attn_softcap) * self.attn_softcap
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
            if self.sandwich:
                x = x + self.rmsnorm(o, w[p + "post_attention_layernorm.weight"], self.eps)
                h = self.rmsnorm(x, w[p + "pre_feedforward_layernorm.weight"], self.eps)
            else:
                x = x + o
                h = self.rmsnorm(x, w[p + "post_attention_layernorm.weight"], self.eps)
            if self.moe and self.moe["sparse"][l]:
                x = x + self.sparse_moe(h, p)
                continue
            if self.fused:  # Phi-3: gate_up_proj rows are [gate | up]
                gu = h @ w[p + "mlp.gate_up_proj.weight"].T
                g, u = np.split(gu, 2, axis=-1)
            else:
                g = h @ w[p + "mlp.gate_proj.weight"].T
                u = h @ w[p + "mlp.up_proj.weight"].T
            if self.mlp_bias:
                g = g + w[p + "mlp.gate_proj.bias"]
                u = u + w[p + "mlp.up_proj.bias"]
            m = (self.act_fn(g) * u) @ w[p + "mlp.down_proj.weight"].T
            if self.mlp_bias:
                m = m + w[p + "mlp.down_proj.bias"]
            if self.sandwich:
                m = self.rmsnorm(m, w[p + "post_feedforward_layernorm.weight"], self.eps)
            x = x + m
        x = self.rmsnorm(x, w["model.norm.weight"], self.eps)
        if getattr(self, "want_hidden", False):  # final_hidden(): AutoModel's last_hidden_state
            return x
        head = w["model.embed_tokens.weight"] if self.tied else w["lm_head.weight"]
        z = x @ head.T
        if self.final_softcap:  # Gemma 2
            z = np.tanh(z / self.final_softcap) * self.final_softcap
        return z


def moe_config(c, arch, layers):
    """Mixture-of-experts settings (None for dense architectures), as MixtralConfig / Qwen3MoeConfig /
    Qwen2MoeConfig and their decoder layers read them; router_aux_loss_coef and router_jitter_noise
    are training-only."""
    if arch not in ("MixtralForCausalLM", "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM"):
        return None
    qwen2 = arch == "Qwen2MoeForCausalLM"
    for key in ("shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts"):
        if c.get(key) and not (qwen2 and key == "shared_expert_intermediate_size"):
            raise Unsupported(f"{key} (shared experts)")
    if arch == "MixtralForCausalLM":
        experts = c.get("num_local_experts", 8)
        return {"experts": experts, "top_k": c.get("num_experts_per_tok", 2), "renormalise": True,
                "sparse": [True] * layers, "shared": False}
    experts, step = c.get("num_experts", 60 if qwen2 else 128), c.get("decoder_sparse_step", 1)
    only = set(c.get("mlp_only_layers") or [])
    return {"experts": experts, "top_k": c.get("num_experts_per_tok", 4 if qwen2 else 8),
            "shared": qwen2 and c.get("shared_expert_intermediate_size", 5632) > 0,
            "renormalise": bool(c.get("norm_topk_prob", False)),
            "sparse": [l not in only and experts > 0 and (l + 1) % step == 0 for l in range(layers)]}


def yarn_get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_inv_freq(c, dim):
    """(inverse frequencies, attention_scaling) as transformers' ROPE_INIT_FUNCTIONS compute them."""
    # transformers >= 5 saves rope_parameters {rope_type, rope_theta, factor, ...} instead of the
    # top-level rope_theta and rope_scaling that earlier versions write.
    rp = c.get("rope_parameters") or {}
    base = rp.get("rope_theta", c.get("rope_theta", 10000.0))
    inv = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    rs = rp or c.get("rope_scaling")
    if not rs:
        return inv, 1.0
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "default":
        return inv, 1.0
    if kind == "linear":
        return inv / rs["factor"], 1.0
    if kind == "dynamic":  # _compute_dynamic_ntk_parameters: seq_len <= max_position_embeddings -> base unchanged
        orig = rs.get("original_max_position_embeddings")
        if orig and orig < c["max_position_embeddings"]:
            raise Unsupported("dynamic rope with original_max_position_embeddings below max_position_embeddings")
        return inv, 1.0
    if kind == "llama3":  # transformers' _compute_llama3_parameters
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":  # _compute_yarn_parameters
        factor = rs["factor"]
        orig = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
        af = rs.get("attention_factor")
        if af is None:
            mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")
            af = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all) if mscale and mscale_all \
                else yarn_get_mscale(factor)
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr_dim(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if rs.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrapolation = 1 - ramp
        return inv / factor * (1 - extrapolation) + inv * extrapolation, af
    if kind in ("longrope", "su"):  # _compute_longrope_parameters, short factors (seq_len <= original)
        orig = c.get("original_max_position_embeddings") or rs.get("original_max_position_embeddings")
        if orig:
            factor = c["max_position_embeddings"] / orig
        else:
            orig, factor = c["max_position_embeddings"], rs.get("factor", 1.0)
        af = rs.get("attention_factor")
        if af is None:
            af = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
        return inv / np.asarray(rs["short_factor"], dtype=np.float64), af
    raise Unsupported(f"rope_scaling type {kind!r}")


def longrope_long_factors(c, dim):
    """(original context, its long-factor inverse frequencies) of a longrope model whose context
    is longer than the original one, else (0, None). transformers reads the original context from
    the config's top level (Phi3Config); rope_scaling's copy when it is absent."""
    rp = c.get("rope_parameters") or {}
    rs = rp or c.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) not in ("longrope", "su"):
        return 0, None
    orig = c.get("original_max_position_embeddings") or rs.get("original_max_position_embeddings")
    if not orig or c["max_position_embeddings"] <= orig:
        return 0, None
    base = rp.get("rope_theta", c.get("rope_theta", 10000.0))
    inv = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    return int(orig), inv / np.asarray(rs["long_factor"], dtype=np.float64)


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


def final_hidden(model, ids):
    """The final hidden states after the model's final norm, [T, hidden] (what transformers'
    AutoModel returns as last_hidden_state; for the CausalLM class, hidden_states[-1])."""
    if isinstance(model, HFModel):
        with model.torch.no_grad():
            out = model.m(model.torch.tensor([ids], dtype=model.torch.long), use_cache=False, output_hidden_states=True)
        return out.hidden_states[-1][0].double().numpy()
    model.want_hidden = True
    try:
        return model.logits(ids)
    finally:
        model.want_hidden = False


def pooled_embedding(hidden, pooling, normalize):
    """Pooling over the prompt's positions as sentence-transformers / vLLM define it: cls = the
    first token, last = the last token, mean = the average; then L2-normalised when asked
    (torch.nn.functional.normalize: x / max(||x||, 1e-12))."""
    v = {"cls": hidden[0], "last": hidden[-1], "mean": hidden.mean(axis=0)}[pooling]
    if normalize:
        v = v / max(float(np.linalg.norm(v)), 1e-12)
    return v


def cmd_embed_check(a):
    """Every row of an embed job's results: /embedding within --tol (max abs) of the reference's
    pooled embedding of the row's /prompt_tokens; error rows are NaN."""
    import h5py
    model, backend = open_model(a.model, a.backend)
    f = h5py.File(a.results, "r")
    emb, prompts, fin = f["embedding"][()], f["prompt_tokens"], f["finish_reason"]
    n = emb.shape[0]
    if a.expect_rows >= 0 and n != a.expect_rows:
        sys.exit(f"{n} rows, want {a.expect_rows}")
    worst, bad, errors = 0.0, 0, 0
    for i in range(n):
        reason = fin[i].decode() if isinstance(fin[i], bytes) else fin[i]
        if reason == "error":
            errors += 1
            if not np.all(np.isnan(emb[i])):
                print(f"row {i}: an error row whose /embedding is not NaN"); bad += 1
            continue
        if reason != "embedded":
            print(f"row {i}: finish_reason {reason!r}, want 'embedded'"); bad += 1; continue
        want = pooled_embedding(final_hidden(model, [int(t) for t in prompts[i]]), a.pooling, a.normalize)
        d = float(np.max(np.abs(emb[i].astype(np.float64) - want)))
        worst = max(worst, d)
        if d > a.tol:
            print(f"row {i}: embedding differs by {d:.3g} (tolerance {a.tol:g})"); bad += 1
    print(f"{backend} reference, pooling {a.pooling}, normalize {a.normalize}: {n - bad - errors}/{n} rows match; "
          f"max |embedding diff| {worst:.3g} (tolerance {a.tol:g}); {errors} error rows")
    sys.exit(1 if bad else 0)


def cmd_score_check(a):
    import h5py
    model, backend = open_model(a.model, a.backend)
    f = h5py.File(a.results, "r")
    n = f["done"].shape[0]
    if a.expect_rows >= 0 and n != a.expect_rows:
        sys.exit(f"expected {a.expect_rows} rows, file has {n}")
    bad, worst = 0, 0.0
    for i in range(n):
        rid, reason = f["id"][i].decode(), f["finish_reason"][i].decode()
        if reason != "scored":
            print(f"row {i} ({rid}): finish_reason {reason!r}, want 'scored'"); bad += 1; continue
        prompt = [int(x) for x in f["prompt_tokens"][i]]
        out = [int(x) for x in f["output_tokens"][i]]
        z = model.logits(prompt + out)[len(prompt) - 1:-1]
        want = np.asarray([log_softmax(z[j])[t] for j, t in enumerate(out)])
        got = np.asarray(f["output_logprobs"][i], dtype=np.float64)
        if len(got) != len(want):
            print(f"row {i} ({rid}): {len(got)} logprobs for {len(want)} tokens"); bad += 1; continue
        d = float(np.max(np.abs(got - want))) if len(want) else 0.0
        worst = max(worst, d)
        problems = []
        if d > a.tol:
            problems.append(f"logprobs differ by {d:.3g} (tolerance {a.tol:g})")
        if abs(float(f["logprob_sum"][i]) - want.sum()) > 5 * a.tol:
            problems.append(f"logprob_sum {f['logprob_sum'][i]} vs {want.sum()}")
        greedy = all(int(np.argmax(z[j])) == t for j, t in enumerate(out))
        if bool(f["is_greedy"][i]) != greedy:
            problems.append(f"is_greedy {bool(f['is_greedy'][i])} vs {greedy}")
        for p in problems:
            print(f"row {i} ({rid}): {p}")
        bad += bool(problems)
    print(f"{backend} reference: {n - bad}/{n} scored rows match; max |logprob diff| {worst:.3g} (tolerance {a.tol:g})")
    sys.exit(1 if bad else 0)


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
    """Greedy continuation of n tokens (eos ignored) and the logprob of each chosen token, each
    from a forward over the sequence so far (longrope's factors depend on its length)."""
    ids, lps = list(prompt), []
    for _ in range(n):
        z = model.logits(ids)[-1]
        ids.append(int(np.argmax(z)))  # argmax: ties go to the lowest id
        lps.append(float(log_softmax(z)[ids[-1]]))
    return ids[len(prompt):], lps


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
    s = sub.add_parser("score-check")
    s.add_argument("results")
    s.add_argument("--model", required=True)
    s.add_argument("--tol", type=float, default=1e-4)
    s.add_argument("--expect-rows", type=int, default=-1)
    e = sub.add_parser("embed-check")
    e.add_argument("results")
    e.add_argument("--model", required=True)
    e.add_argument("--pooling", choices=("last", "mean", "cls"), required=True)
    e.add_argument("--normalize", type=lambda s: s.lower() in ("1", "true", "yes"), required=True)
    e.add_argument("--tol", type=float, default=1e-4)
    e.add_argument("--expect-rows", type=int, default=-1)
    a = ap.parse_args()
    try:
        {"generate": cmd_generate, "check": cmd_check, "score-check": cmd_score_check, "embed-check": cmd_embed_check}[a.cmd](a)
    except Unsupported as e:
        sys.exit(f"hf_reference: unsupported: {e}")


if __name__ == "__main__":
    main()
