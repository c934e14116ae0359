// Naive double-precision reference for Hugging Face Llama-family models.
// See reference_llama.h. Written for clarity, not speed. Shares no code with src/.
#include "reference_llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error("reference_llama: " + message);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes;
}

// ---- small linear algebra ------------------------------------------------------

// y = W x (+ b), with W stored [out, in] row-major.
std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& b,
                           const std::vector<double>& x, size_t out) {
  const size_t in = x.size();
  if (w.size() != out * in) fail("matvec: weight size mismatch");
  std::vector<double> y(out, 0.0);
  for (size_t r = 0; r < out; ++r) {
    double sum = 0.0;
    const double* row = &w[r * in];
    for (size_t c = 0; c < in; ++c) sum += row[c] * x[c];
    y[r] = sum + (b.empty() ? 0.0 : b[r]);
  }
  return y;
}

// x / sqrt(mean(x^2) + eps) * weight
std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& weight,
                             double eps) {
  double mean_square = 0.0;
  for (double v : x) mean_square += v * v;
  mean_square /= static_cast<double>(x.size());
  const double scale = 1.0 / std::sqrt(mean_square + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * weight[i];
  return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// Hugging Face "rotate half" RoPE on one head stored at vec[offset .. offset+d).
void apply_rope(std::vector<double>& vec, size_t offset, size_t head_dim, int pos,
                const std::vector<double>& inv_freq) {
  const size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = vec[offset + i];
    const double b = vec[offset + i + half];
    vec[offset + i] = a * c - b * s;
    vec[offset + i + half] = b * c + a * s;
  }
}

// ---- config helpers -------------------------------------------------------------

bool has_value(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

double get_double(const json& j, const char* key, double fallback) {
  return has_value(j, key) ? j.at(key).get<double>() : fallback;
}

int get_int(const json& j, const char* key) {
  if (!has_value(j, key)) fail(std::string("config.json lacks ") + key);
  return j.at(key).get<int>();
}

// ---- safetensors dtype conversion -------------------------------------------------

uint16_t load_u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t load_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t load_u64(const unsigned char* p) {
  return static_cast<uint64_t>(load_u32(p)) | (static_cast<uint64_t>(load_u32(p + 4)) << 32);
}

}  // namespace

// ---- public helpers ------------------------------------------------------------------

double reference_f16_to_double(uint16_t bits) {
  const int sign = (bits >> 15) & 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else {
    value = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  }
  return sign ? -value : value;
}

double reference_bf16_to_double(uint16_t bits) {
  const uint32_t f32_bits = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &f32_bits, sizeof f);
  return static_cast<double>(f);
}

std::map<std::string, ReferenceTensor> reference_read_safetensors(const std::string& path) {
  const std::string file = read_whole_file(path);
  if (file.size() < 8) fail(path + ": too short for a safetensors file");
  const auto* bytes = reinterpret_cast<const unsigned char*>(file.data());
  const uint64_t header_len = load_u64(bytes);
  if (header_len > file.size() - 8) fail(path + ": header length past end of file");
  const json header = json::parse(file.substr(8, header_len));
  const unsigned char* data = bytes + 8 + header_len;
  const uint64_t data_len = file.size() - 8 - header_len;

  std::map<std::string, ReferenceTensor> tensors;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = info.at("dtype").get<std::string>();
    ReferenceTensor t;
    t.shape = info.at("shape").get<std::vector<int64_t>>();
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    const auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
    if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_len)
      fail(path + ": bad data_offsets for " + name);
    const unsigned char* p = data + offsets[0];
    const uint64_t nbytes = offsets[1] - offsets[0];
    size_t elem_size;
    if (dtype == "F64") elem_size = 8;
    else if (dtype == "F32") elem_size = 4;
    else if (dtype == "F16" || dtype == "BF16") elem_size = 2;
    else fail(path + ": unsupported dtype " + dtype + " for " + name);
    if (nbytes != static_cast<uint64_t>(count) * elem_size)
      fail(path + ": size of " + name + " does not match its shape");
    t.data.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const unsigned char* e = p + i * elem_size;
      if (dtype == "F64") {
        const uint64_t b = load_u64(e);
        double d;
        std::memcpy(&d, &b, sizeof d);
        t.data[i] = d;
      } else if (dtype == "F32") {
        const uint32_t b = load_u32(e);
        float f;
        std::memcpy(&f, &b, sizeof f);
        t.data[i] = f;
      } else if (dtype == "F16") {
        t.data[i] = reference_f16_to_double(load_u16(e));
      } else {
        t.data[i] = reference_bf16_to_double(load_u16(e));
      }
    }
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

ReferenceConfig reference_read_config(const std::string& model_dir) {
  const json j = json::parse(read_whole_file(model_dir + "/config.json"));
  ReferenceConfig c;
  c.hidden_size = get_int(j, "hidden_size");
  c.intermediate_size = get_int(j, "intermediate_size");
  c.num_attention_heads = get_int(j, "num_attention_heads");
  c.num_key_value_heads =
      has_value(j, "num_key_value_heads") ? get_int(j, "num_key_value_heads") : c.num_attention_heads;
  c.head_dim = has_value(j, "head_dim") ? get_int(j, "head_dim") : c.hidden_size / c.num_attention_heads;
  c.num_hidden_layers = get_int(j, "num_hidden_layers");
  c.vocab_size = get_int(j, "vocab_size");
  c.rms_norm_eps = get_double(j, "rms_norm_eps", 1e-6);
  c.rope_theta = get_double(j, "rope_theta", 10000.0);
  c.tie_word_embeddings = has_value(j, "tie_word_embeddings") && j.at("tie_word_embeddings").get<bool>();
  if (c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0)
    fail("num_attention_heads must be a positive multiple of num_key_value_heads");
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) fail("head_dim must be positive and even");

  if (has_value(j, "rope_scaling")) {
    const json& rs = j.at("rope_scaling");
    std::string type;
    if (has_value(rs, "rope_type")) type = rs.at("rope_type").get<std::string>();
    else if (has_value(rs, "type")) type = rs.at("type").get<std::string>();
    if (type == "llama3") {
      c.rope_scaling_type = "llama3";
      c.rope_factor = get_double(rs, "factor", 8.0);
      c.rope_low_freq_factor = get_double(rs, "low_freq_factor", 1.0);
      c.rope_high_freq_factor = get_double(rs, "high_freq_factor", 4.0);
      c.rope_original_max_position_embeddings =
          get_double(rs, "original_max_position_embeddings", 8192.0);
    } else if (type == "linear") {
      c.rope_scaling_type = "linear";
      c.rope_factor = get_double(rs, "factor", 1.0);
    } else if (type.empty() || type == "default") {
      // plain RoPE
    } else {
      fail("unsupported rope_scaling type '" + type + "'");
    }
  }
  return c;
}

std::vector<double> reference_rope_inv_freq(const ReferenceConfig& c) {
  const int d = c.head_dim;
  std::vector<double> inv_freq(d / 2);
  for (int i = 0; i < d / 2; ++i)
    inv_freq[i] = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / d);

  if (c.rope_scaling_type == "linear") {
    for (double& f : inv_freq) f /= c.rope_factor;
  } else if (c.rope_scaling_type == "llama3") {
    // Hugging Face transformers: _compute_llama3_parameters.
    const double pi = std::acos(-1.0);
    const double old_context_len = c.rope_original_max_position_embeddings;
    const double low_freq_wavelen = old_context_len / c.rope_low_freq_factor;
    const double high_freq_wavelen = old_context_len / c.rope_high_freq_factor;
    for (double& f : inv_freq) {
      const double wavelen = 2.0 * pi / f;
      if (wavelen > low_freq_wavelen) {
        f = f / c.rope_factor;  // low frequencies: fully scaled
      } else if (wavelen < high_freq_wavelen) {
        // high frequencies: unchanged
      } else {
        const double smooth = (old_context_len / wavelen - c.rope_low_freq_factor) /
                              (c.rope_high_freq_factor - c.rope_low_freq_factor);
        f = (1.0 - smooth) * f / c.rope_factor + smooth * f;
      }
    }
  }
  return inv_freq;
}

// ---- ReferenceLlama -------------------------------------------------------------------

ReferenceLlama::ReferenceLlama(const std::string& model_dir) {
  namespace fs = std::filesystem;
  config_ = reference_read_config(model_dir);
  inv_freq_ = reference_rope_inv_freq(config_);

  // Gather tensors from model.safetensors, or from every shard of the index.
  std::map<std::string, ReferenceTensor> tensors;
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  std::vector<std::string> files;
  if (fs::exists(model_dir + "/model.safetensors")) {
    files.push_back(model_dir + "/model.safetensors");
  } else if (fs::exists(index_path)) {
    const json index = json::parse(read_whole_file(index_path));
    std::set<std::string> shards;
    for (const auto& [name, file] : index.at("weight_map").items()) shards.insert(file.get<std::string>());
    for (const auto& s : shards) files.push_back(model_dir + "/" + s);
  } else {
    fail("no model.safetensors or model.safetensors.index.json in " + model_dir);
  }
  for (const auto& f : files) tensors.merge(reference_read_safetensors(f));

  const ReferenceConfig& c = config_;
  auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    auto it = tensors.find(name);
    if (it == tensors.end()) fail("missing tensor " + name);
    if (it->second.shape != shape) fail("tensor " + name + " has an unexpected shape");
    return it->second.data;
  };
  auto take_optional = [&](const std::string& name, std::vector<int64_t> shape) {
    return tensors.count(name) ? take(name, shape) : std::vector<double>{};
  };

  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q_dim = int64_t{c.num_attention_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_key_value_heads} * c.head_dim;

  embed_ = take("model.embed_tokens.weight", {V, H});
  final_norm_ = take("model.norm.weight", {H});
  if (!c.tie_word_embeddings && tensors.count("lm_head.weight"))
    lm_head_ = take("lm_head.weight", {V, H});
  else
    lm_head_ = embed_;

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Layer L;
    L.input_norm = take(p + "input_layernorm.weight", {H});
    L.post_norm = take(p + "post_attention_layernorm.weight", {H});
    L.wq = take(p + "self_attn.q_proj.weight", {q_dim, H});
    L.wk = take(p + "self_attn.k_proj.weight", {kv_dim, H});
    L.wv = take(p + "self_attn.v_proj.weight", {kv_dim, H});
    L.wo = take(p + "self_attn.o_proj.weight", {H, q_dim});
    L.bq = take_optional(p + "self_attn.q_proj.bias", {q_dim});
    L.bk = take_optional(p + "self_attn.k_proj.bias", {kv_dim});
    L.bv = take_optional(p + "self_attn.v_proj.bias", {kv_dim});
    L.bo = take_optional(p + "self_attn.o_proj.bias", {H});
    L.w_gate = take(p + "mlp.gate_proj.weight", {I, H});
    L.w_up = take(p + "mlp.up_proj.weight", {I, H});
    L.w_down = take(p + "mlp.down_proj.weight", {H, I});
    L.b_gate = take_optional(p + "mlp.gate_proj.bias", {I});
    L.b_up = take_optional(p + "mlp.up_proj.bias", {I});
    L.b_down = take_optional(p + "mlp.down_proj.bias", {H});
    layers_.push_back(std::move(L));
  }
}

std::vector<std::vector<double>> ReferenceLlama::forward(const std::vector<int>& tokens,
                                                         KvCache& cache, bool last_only) const {
  const ReferenceConfig& c = config_;
  const size_t H = c.hidden_size, D = c.head_dim;
  const size_t n_heads = c.num_attention_heads, n_kv = c.num_key_value_heads;
  const size_t group = n_heads / n_kv;  // query heads per KV head
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (cache.k.empty()) {
    cache.k.resize(layers_.size());
    cache.v.resize(layers_.size());
  }

  std::vector<std::vector<double>> out;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int token = tokens[t];
    if (token < 0 || token >= c.vocab_size) fail("token id out of range: " + std::to_string(token));
    const int pos = static_cast<int>(cache.k[0].size());

    // Embedding.
    std::vector<double> x(embed_.begin() + static_cast<ptrdiff_t>(token * H),
                          embed_.begin() + static_cast<ptrdiff_t>((token + 1) * H));

    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];

      // --- self-attention block ---
      const std::vector<double> h = rms_norm(x, L.input_norm, c.rms_norm_eps);
      std::vector<double> q = matvec(L.wq, L.bq, h, n_heads * D);
      std::vector<double> k = matvec(L.wk, L.bk, h, n_kv * D);
      std::vector<double> v = matvec(L.wv, L.bv, h, n_kv * D);
      for (size_t hd = 0; hd < n_heads; ++hd) apply_rope(q, hd * D, D, pos, inv_freq_);
      for (size_t hd = 0; hd < n_kv; ++hd) apply_rope(k, hd * D, D, pos, inv_freq_);
      cache.k[l].push_back(k);
      cache.v[l].push_back(v);
      const size_t n_pos = cache.k[l].size();  // causal: positions 0..pos

      std::vector<double> attn(n_heads * D, 0.0);
      for (size_t hd = 0; hd < n_heads; ++hd) {
        const size_t kvh = hd / group;
        std::vector<double> scores(n_pos);
        for (size_t j = 0; j < n_pos; ++j) {
          double dot = 0.0;
          for (size_t i = 0; i < D; ++i) dot += q[hd * D + i] * cache.k[l][j][kvh * D + i];
          scores[j] = dot * scale;
        }
        const double max_score = *std::max_element(scores.begin(), scores.end());
        double denom = 0.0;
        for (double& s : scores) {
          s = std::exp(s - max_score);
          denom += s;
        }
        for (size_t j = 0; j < n_pos; ++j) {
          const double w = scores[j] / denom;
          for (size_t i = 0; i < D; ++i) attn[hd * D + i] += w * cache.v[l][j][kvh * D + i];
        }
      }
      const std::vector<double> o = matvec(L.wo, L.bo, attn, H);
      for (size_t i = 0; i < H; ++i) x[i] += o[i];

      // --- MLP block (SwiGLU) ---
      const std::vector<double> h2 = rms_norm(x, L.post_norm, c.rms_norm_eps);
      const std::vector<double> gate = matvec(L.w_gate, L.b_gate, h2, c.intermediate_size);
      const std::vector<double> up = matvec(L.w_up, L.b_up, h2, c.intermediate_size);
      std::vector<double> act(gate.size());
      for (size_t i = 0; i < act.size(); ++i) act[i] = silu(gate[i]) * up[i];
      const std::vector<double> down = matvec(L.w_down, L.b_down, act, H);
      for (size_t i = 0; i < H; ++i) x[i] += down[i];
    }

    if (!last_only || t + 1 == tokens.size()) {
      const std::vector<double> xn = rms_norm(x, final_norm_, c.rms_norm_eps);
      out.push_back(matvec(lm_head_, {}, xn, c.vocab_size));
    }
  }
  return out;
}

std::vector<std::vector<double>> ReferenceLlama::logits(const std::vector<int>& tokens) const {
  KvCache fresh;  // nothing carried over: a full recompute every call
  return forward(tokens, fresh, /*last_only=*/false);
}

std::vector<int> ReferenceLlama::greedy(const std::vector<int>& prompt, int max_new_tokens) const {
  if (prompt.empty()) fail("greedy needs a non-empty prompt");
  std::vector<int> generated;
  if (max_new_tokens <= 0) return generated;
  KvCache cache;
  std::vector<double> last = forward(prompt, cache, /*last_only=*/true).back();
  for (int n = 0; n < max_new_tokens; ++n) {
    const int next = argmax(last);
    generated.push_back(next);
    if (n + 1 < max_new_tokens) last = forward({next}, cache, /*last_only=*/true).back();
  }
  return generated;
}

std::vector<double> ReferenceLlama::log_softmax(const std::vector<double>& logits) {
  if (logits.empty()) return {};
  const double max_value = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (double v : logits) sum += std::exp(v - max_value);
  const double log_z = max_value + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_z;
  return out;
}

int ReferenceLlama::argmax(const std::vector<double>& values) {
  if (values.empty()) fail("argmax of an empty vector");
  int best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = static_cast<int>(i);  // strict: ties keep the lowest id
  return best;
}
