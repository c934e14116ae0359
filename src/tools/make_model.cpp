// Writes a Hugging Face Llama-family model folder with seeded random weights.
// Bit-identical output on every machine: integer PRNG, exact float arithmetic, no libm calls.
#pragma GCC optimize("fp-contract=off")
#include "tools/make_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/dtype.h"
#include "common/error.h"
#include "tools/fp8_quantizer.h"
#include "tools/int4_quantizer.h"
#include "tools/make_tokenizer.h"
#include "tools/resolved_model.h"

namespace tpbatch {
namespace {

using nlohmann::ordered_json;

// config.json's keys of the Gemma 2 / 3, Phi-3 and Qwen3 families, in the order transformers
// writes them (the file is byte-identical on every machine).
void add_family_keys(const ResolvedModel& r, ordered_json& j) {
  if (r.sandwich) {
    // Gemma's defaults (transformers' Gemma2Config / Gemma3TextConfig), the sliding window shortened
    // so that test prompts outgrow it.
    j["query_pre_attn_scalar"] = r.head_dim;
    j["sliding_window"] = 32;
    if (r.architecture == "Gemma2ForCausalLM") {
      j["attn_logit_softcapping"] = 50.0;
      j["final_logit_softcapping"] = 30.0;
    } else {
      j["attn_logit_softcapping"] = nullptr;
      j["final_logit_softcapping"] = nullptr;
      j["rope_local_base_freq"] = 10000.0;
      j["sliding_window_pattern"] = 6;
    }
  }
  if (r.architecture == "Phi3ForCausalLM") {
    j["original_max_position_embeddings"] = r.max_pos;
    j["sliding_window"] = nullptr;
    j["pad_token_id"] = 0;  // transformers' Phi3Config defaults to 32000, outside a small vocabulary
  }
  if (r.architecture == "Qwen3ForCausalLM") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = r.layers;
  }
}

// config.json's mixture-of-experts keys: Mixtral's, else Qwen3-MoE's / Qwen2-MoE's.
void add_expert_keys(const ResolvedModel& r, ordered_json& j) {
  if (r.mixtral) {  // transformers' MixtralConfig keys
    j["num_local_experts"] = r.experts;
    j["num_experts_per_tok"] = r.top_k;
    j["sliding_window"] = nullptr;
    j["router_aux_loss_coef"] = 0.02;
    j["router_jitter_noise"] = 0.0;
    j["output_router_logits"] = false;
  }
  if (r.qwen_moe) {  // Qwen3MoeConfig / Qwen2MoeConfig keys
    j["num_experts"] = r.experts;
    j["num_experts_per_tok"] = r.top_k;
    j["moe_intermediate_size"] = r.moe_inter;
    if (r.qwen2_moe) j["shared_expert_intermediate_size"] = r.shared_inter;
    j["norm_topk_prob"] = r.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = r.mlp_only_layers;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = r.layers;
    j["router_aux_loss_coef"] = 0.001;
    j["output_router_logits"] = false;
  }
}

std::string config_json(const ResolvedModel& r) {
  ordered_json j;
  j["architectures"] = ordered_json::array({r.architecture});
  j["model_type"] = r.model_type;
  j["hidden_size"] = r.hidden;
  j["intermediate_size"] = r.intermediate;
  j["num_hidden_layers"] = r.layers;
  j["num_attention_heads"] = r.heads;
  j["num_key_value_heads"] = r.kv_heads;
  j["head_dim"] = r.head_dim;
  j["vocab_size"] = r.vocab;
  j["max_position_embeddings"] = r.max_pos;
  j["rms_norm_eps"] = r.rms_norm_eps;
  j["rope_theta"] = r.rope_theta;
  if (r.rope_scaling == "llama3") {
    j["rope_scaling"] = {{"factor", 8.0},
                         {"high_freq_factor", 4.0},
                         {"low_freq_factor", 1.0},
                         {"original_max_position_embeddings", r.max_pos},
                         {"rope_type", "llama3"}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = r.gemma ? "gelu_pytorch_tanh" : "silu";
  if (r.gemma) j["hidden_activation"] = "gelu_pytorch_tanh";  // as Gemma 1.1 and later write it
  add_family_keys(r, j);
  add_expert_keys(r, j);
  if (r.architecture != "Qwen2ForCausalLM" && !r.mixtral && !r.qwen2_moe) j["attention_bias"] = r.attention_bias;
  j["attention_dropout"] = 0.0;
  if (r.architecture == "LlamaForCausalLM") j["mlp_bias"] = false;
  if (r.architecture == "MistralForCausalLM") j["sliding_window"] = nullptr;
  if (r.architecture == "Qwen2ForCausalLM") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = r.layers;
  }
  j["initializer_range"] = 0.02;
  j["tie_word_embeddings"] = r.tied;
  j["torch_dtype"] = r.dtype;
  j["use_cache"] = true;
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  return j.dump(2) + "\n";
}

std::string generation_config_json() {
  ordered_json j;
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  return j.dump(2) + "\n";
}

// ---- deterministic random numbers ---------------------------------------------------------------

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Approximately standard normal: sum of four 16-bit uniforms (Irwin-Hall), rescaled to unit variance.
// Integer sum and two exactly-rounded float ops, so identical on every IEEE machine (Box-Muller's
// log/cos could differ between libm versions).
inline float normal(uint64_t& state) {
  const uint64_t x = splitmix64(state);
  const uint32_t s = uint32_t(x & 0xffff) + uint32_t((x >> 16) & 0xffff) + uint32_t((x >> 32) & 0xffff) + uint32_t(x >> 48);
  // uniforms (k + 0.5) / 65536: sum has mean 2 and variance 4/12.
  return (float(s) - 131070.0f) * 2.6429993e-05f;  // sqrt(3) / 65536
}

// ---- tensors ----------------------------------------------------------------------------------------

struct TensorSpec {
  std::vector<int64_t> shape;
  float mean = 0.0f;  // value = mean + std * normal
  float std = 0.0f;
  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= uint64_t(d);
    return n;
  }
};

// Scales chosen so a random model's activations stay O(1) and greedy decoding is not one repeated
// token: embeddings N(0, e^2) with e = 4/sqrt(hidden) (logits ~ N(0, 16)); projections reading a
// normalized vector have std 1/sqrt(fan_in); o_proj and down_proj write alpha*e-sized updates into the
// residual stream (alpha = 6, so the layers, not the input embedding, dominate the last hidden state);
// RMSNorm weights 1 + N(0, 0.02^2).
std::map<std::string, TensorSpec> tensor_specs(const ResolvedModel& r) {
  std::map<std::string, TensorSpec> t;
  const float e = float(4.0 / std::sqrt(double(r.hidden)));
  // Each block's update to the residual stream: alpha times an embedding element. Gemma scales its
  // embeddings by sqrt(hidden); without Gemma 2/3's post-norms (below) its blocks are scaled alike,
  // or the embedding would decide every token.
  const float alpha = 6.0f * (r.gemma && !r.sandwich ? float(std::sqrt(double(r.hidden))) : 1.0f);
  const float in_std = float(1.0 / std::sqrt(double(r.hidden)));
  const int64_t q_out = r.heads * r.head_dim, kv_out = r.kv_heads * r.head_dim;
  t["model.embed_tokens.weight"] = {{r.vocab, r.hidden}, 0.0f, e};
  if (!r.tied) t["lm_head.weight"] = {{r.vocab, r.hidden}, 0.0f, e};
  // Gemma's norms multiply by (1 + weight): the same factors come from weights around 0.
  const float norm_mean = r.gemma ? 0.0f : 1.0f;
  t["model.norm.weight"] = {{r.hidden}, norm_mean, 0.02f};
  for (int64_t l = 0; l < r.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t[p + "input_layernorm.weight"] = {{r.hidden}, norm_mean, 0.02f};
    t[p + "post_attention_layernorm.weight"] = {{r.hidden}, norm_mean, 0.02f};
    if (r.sandwich) {
      // The post-norms set the size of each block's update to the residual stream: (1 + 5) per
      // element, like alpha * e above, so that the layers, not the sqrt(hidden)-scaled input
      // embedding (4 per element), dominate the last hidden state.
      t[p + "post_attention_layernorm.weight"] = {{r.hidden}, 5.0f, 0.5f};
      t[p + "pre_feedforward_layernorm.weight"] = {{r.hidden}, norm_mean, 0.02f};
      t[p + "post_feedforward_layernorm.weight"] = {{r.hidden}, 5.0f, 0.5f};
    }
    if (r.qk_norm) {  // spread widely, so that a norm applied to the wrong head or not at all shows
      t[p + "self_attn.q_norm.weight"] = {{r.head_dim}, norm_mean, 0.3f};
      t[p + "self_attn.k_norm.weight"] = {{r.head_dim}, norm_mean, 0.3f};
    }
    if (r.fused) {  // Phi-3: [q | k | v] rows
      t[p + "self_attn.qkv_proj.weight"] = {{q_out + 2 * kv_out, r.hidden}, 0.0f, in_std};
    } else {
      t[p + "self_attn.q_proj.weight"] = {{q_out, r.hidden}, 0.0f, in_std};
      t[p + "self_attn.k_proj.weight"] = {{kv_out, r.hidden}, 0.0f, in_std};
      t[p + "self_attn.v_proj.weight"] = {{kv_out, r.hidden}, 0.0f, in_std};
    }
    t[p + "self_attn.o_proj.weight"] = {{r.hidden, q_out}, 0.0f, float(alpha * e / std::sqrt(double(q_out)))};
    if (r.attention_bias) {
      t[p + "self_attn.q_proj.bias"] = {{q_out}, 0.0f, 0.1f};
      t[p + "self_attn.k_proj.bias"] = {{kv_out}, 0.0f, 0.1f};
      t[p + "self_attn.v_proj.bias"] = {{kv_out}, 0.0f, 0.1f};
      // Llama's attention_bias also biases o_proj (transformers' LlamaAttention); Qwen2's does not.
      if (r.architecture == "LlamaForCausalLM") t[p + "self_attn.o_proj.bias"] = {{r.hidden}, 0.0f, 0.1f};
    }
    if (r.moe_layer(l)) {
      // The router spread widely (logits ~ N(0, 4)) so that routing is decisive and a wrong
      // choice of experts shows; each expert like the dense MLP, at its own width.
      const std::string b = p + (r.mixtral ? "block_sparse_moe." : "mlp.");
      t[b + "gate.weight"] = {{r.experts, r.hidden}, 0.0f, 2.0f * in_std};
      for (int64_t ex = 0; ex < r.experts; ++ex) {
        const std::string x = b + "experts." + std::to_string(ex) + ".";
        t[x + (r.mixtral ? "w1.weight" : "gate_proj.weight")] = {{r.moe_inter, r.hidden}, 0.0f, in_std};
        t[x + (r.mixtral ? "w3.weight" : "up_proj.weight")] = {{r.moe_inter, r.hidden}, 0.0f, in_std};
        t[x + (r.mixtral ? "w2.weight" : "down_proj.weight")] = {{r.hidden, r.moe_inter}, 0.0f,
                                                                 float(2.0 * alpha * e / std::sqrt(double(r.moe_inter)))};
      }
      if (r.shared_inter > 0) {  // its gate ~ N(0, 1): sigmoid weights spread over (0.1, 0.9)
        t[b + "shared_expert_gate.weight"] = {{1, r.hidden}, 0.0f, in_std};
        t[b + "shared_expert.gate_proj.weight"] = {{r.shared_inter, r.hidden}, 0.0f, in_std};
        t[b + "shared_expert.up_proj.weight"] = {{r.shared_inter, r.hidden}, 0.0f, in_std};
        t[b + "shared_expert.down_proj.weight"] = {{r.hidden, r.shared_inter}, 0.0f,
                                                   float(2.0 * alpha * e / std::sqrt(double(r.shared_inter)))};
      }
      continue;
    }
    if (r.fused) {  // Phi-3: [gate | up] rows
      t[p + "mlp.gate_up_proj.weight"] = {{2 * r.intermediate, r.hidden}, 0.0f, in_std};
    } else {
      t[p + "mlp.gate_proj.weight"] = {{r.intermediate, r.hidden}, 0.0f, in_std};
      t[p + "mlp.up_proj.weight"] = {{r.intermediate, r.hidden}, 0.0f, in_std};
    }
    t[p + "mlp.down_proj.weight"] = {{r.hidden, r.intermediate}, 0.0f,
                                     float(2.0 * alpha * e / std::sqrt(double(r.intermediate)))};
  }
  return t;
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) throw Error(path.string() + ": cannot create: " + std::strerror(errno));
  if (std::fwrite(text.data(), 1, text.size(), f.get()) != text.size() || std::fclose(f.release()) != 0)
    throw Error(path.string() + ": write failed");
}

// --quantize resolved: none, an fp8 scheme or a 4-bit one.
struct QuantizeChoice {
  bool quantize = false, is_int4 = false;
  Int4Scheme int4 = Int4Scheme::Awq;
  Fp8Scheme fp8 = Fp8Scheme::Block;
};

QuantizeChoice quantize_choice(const MakeModelOptions& o) {
  QuantizeChoice q;
  q.quantize = o.quantize != "none";
  q.is_int4 = q.quantize && parse_int4_scheme(o.quantize, q.int4);
  if (q.quantize && !q.is_int4) q.fp8 = parse_fp8_scheme(o.quantize);
  if (o.dequantize && !q.quantize) throw Error("make-model: --dequantize needs --quantize (the format to round-trip)");
  return q;
}

// The safetensors header, padded to 8 bytes: tensors laid out in name order (the header's keys are
// sorted too); a quantized one (tools/fp8_quantizer.h, tools/int4_quantizer.h) is followed by its
// scale (and zero) tensors.
std::string safetensors_header(const std::map<std::string, TensorSpec>& specs, const ResolvedModel& r,
                               const QuantizeChoice& q, bool dequantize) {
  const char* st_dtype = r.dtype == "float32" ? "F32" : r.dtype == "bfloat16" ? "BF16" : "F16";
  const size_t es = r.dtype == "float32" ? 4 : 2;
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& [name, spec] : specs) {
    if (!(q.quantize && fp8_quantizes(name))) {
      const uint64_t bytes = spec.numel() * es;
      header[name] = {{"dtype", st_dtype}, {"shape", spec.shape}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    } else if (q.is_int4) {
      int4_header_entries(header, offset, q.int4, name, spec.shape, dequantize);
    } else {
      fp8_header_entries(header, offset, q.fp8, name, spec.shape, dequantize);
    }
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  return text;
}

void write_safetensors(const std::filesystem::path& path, const ResolvedModel& r, const MakeModelOptions& o) {
  const auto specs = tensor_specs(r);
  const size_t es = r.dtype == "float32" ? 4 : 2;
  const QuantizeChoice q = quantize_choice(o);
  const bool quantize = q.quantize, is_int4 = q.is_int4;
  const std::string text = safetensors_header(specs, r, q, o.dequantize);

  const std::filesystem::path tmp = path.string() + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) throw Error(tmp.string() + ": cannot create: " + std::strerror(errno));
  std::vector<char> iobuf(1 << 20);
  std::setvbuf(f.get(), iobuf.data(), _IOFBF, iobuf.size());
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f.get()) == 8 && std::fwrite(text.data(), 1, text.size(), f.get()) == text.size();
  auto put = [&](const void* data, size_t bytes) { ok = ok && std::fwrite(data, 1, bytes, f.get()) == bytes; };

  constexpr size_t kChunk = 1 << 18;
  std::vector<float> vals(kChunk);
  std::vector<unsigned char> bytes(kChunk * 4);
  for (const auto& [name, spec] : specs) {
    uint64_t state = o.seed * 0x9e3779b97f4a7c15ull ^ fnv1a(name);
    splitmix64(state);
    if (quantize && fp8_quantizes(name)) {  // the whole tensor at once: its scales need every value
      std::vector<float> w(size_t(spec.numel()));
      for (float& v : w) v = spec.mean + spec.std * normal(state);
      const auto out = is_int4 ? int4_file_bytes(q.int4, name, w.data(), spec.shape[0], spec.shape[1], o.dequantize)
                               : fp8_file_bytes(q.fp8, name, w.data(), spec.shape[0], spec.shape[1], o.dequantize);
      put(out.data(), out.size());
      continue;
    }
    for (uint64_t done = 0, n = spec.numel(); ok && done < n;) {
      const size_t m = size_t(std::min<uint64_t>(kChunk, n - done));
      for (size_t i = 0; i < m; ++i) vals[i] = spec.mean + spec.std * normal(state);
      if (es == 4) {
        std::memcpy(bytes.data(), vals.data(), m * 4);
      } else if (r.dtype == "bfloat16") {
        for (size_t i = 0; i < m; ++i) {
          const uint16_t h = f32_to_bf16(vals[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      } else {
        for (size_t i = 0; i < m; ++i) {
          const uint16_t h = f32_to_f16(vals[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      }
      put(bytes.data(), m * es);
      done += m;
    }
  }
  ok = ok && std::fclose(f.release()) == 0;
  if (!ok) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw Error(path.string() + ": write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": cannot rename from " + tmp.string() + ": " + ec.message());
}

}  // namespace

void make_model(const std::filesystem::path& out_dir, const MakeModelOptions& options) {
  const ResolvedModel r = resolve_model(options);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir))
    throw Error(out_dir.string() + ": cannot create the output folder" + (ec ? ": " + ec.message() : std::string()));
  std::string config = config_json(r);
  if (options.quantize != "none" && !options.dequantize) {
    ordered_json j = ordered_json::parse(config);
    Int4Scheme int4 = Int4Scheme::Awq;
    j["quantization_config"] = parse_int4_scheme(options.quantize, int4) ? int4_quantization_config(int4)
                                                                         : fp8_quantization_config(parse_fp8_scheme(options.quantize));
    config = j.dump(2) + "\n";
  }
  write_text(out_dir / "config.json", config);
  write_text(out_dir / "generation_config.json", generation_config_json());
  write_text(out_dir / "tokenizer.json", make_tokenizer_json(r.vocab));
  write_text(out_dir / "tokenizer_config.json", make_tokenizer_config_json(r.max_pos));
  write_safetensors(out_dir / "model.safetensors", r, options);
}

}  // namespace tpbatch
