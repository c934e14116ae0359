// config.json + generation_config.json of a Hugging Face Llama-family model folder.
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/read_text.h"
#include "model/config_reader.h"
#include "model/model_family.h"
#include "model/rope_frequencies.h"

namespace tpbatch {
namespace {

using nlohmann::json;
using config_json::parse_object, config_json::Reader, config_json::type_name;

std::string join_path(const std::string& label, const char* file) {
  if (label.empty()) return file;
  return (std::filesystem::path(label) / file).string();
}

// `key` is rope_scaling (transformers < 5) or rope_parameters (transformers >= 5 writes rope_theta
// and the scaling there, and no top-level rope_theta / rope_scaling).
RopeScaling parse_rope_scaling(const Reader& r, const char* key = "rope_scaling") {
  RopeScaling rs;
  if (!r.present(key)) return rs;
  const json& v = r.obj.at(key);
  if (!v.is_object()) r.fail(key, "must be null or an object, got " + type_name(v));
  Reader s{v, r.file + ": " + key};
  std::string type = s.string_or("rope_type", s.string_or("type", ""));
  if (type.empty()) r.fail(key, "has neither 'rope_type' nor 'type'");
  if (type == "default") return rs;
  if (type == "linear") {
    rs.type = "linear";
    rs.factor = s.positive_number("factor");
  } else if (type == "llama3") {
    rs.type = "llama3";
    rs.factor = s.positive_number("factor");
    rs.low_freq_factor = s.positive_number("low_freq_factor");
    rs.high_freq_factor = s.positive_number("high_freq_factor");
    rs.original_max_position_embeddings = s.positive("original_max_position_embeddings");
    if (!(rs.high_freq_factor > rs.low_freq_factor))
      r.fail(key, "llama3 high_freq_factor must exceed low_freq_factor");
  } else if (type == "yarn") {
    rs.type = "yarn";
    rs.factor = s.positive_number("factor");
    rs.attention_factor = s.positive_number_or("attention_factor", 0.0);
    rs.beta_fast = s.positive_number_or("beta_fast", 32.0);
    rs.beta_slow = s.positive_number_or("beta_slow", 1.0);
    rs.mscale = s.positive_number_or("mscale", 0.0);
    rs.mscale_all_dim = s.positive_number_or("mscale_all_dim", 0.0);
    rs.truncate = s.boolean_or("truncate", true);
    rs.original_max_position_embeddings = s.positive_or("original_max_position_embeddings", 0);  // 0: the model's
  } else if (type == "dynamic") {
    // Dynamic NTK changes the base only for sequences longer than max_position_embeddings (HF's
    // _compute_dynamic_ntk_parameters), which the context limit never admits: the default rope, exactly.
    rs.type = "dynamic";
    rs.factor = s.positive_number("factor");
    rs.original_max_position_embeddings = s.positive_or("original_max_position_embeddings", 0);
  } else if (type == "longrope" || type == "su") {
    rs.type = "longrope";
    auto factors = [&](const char* name) {
      if (!s.present(name)) s.fail(name, "missing");
      const json& a = v.at(name);
      if (!a.is_array()) s.fail(name, "must be a list of numbers, got " + type_name(a));
      std::vector<double> out;
      for (const json& e : a) {
        if (!e.is_number() || !(e.get<double>() > 0)) s.fail(name, "must hold positive numbers, got " + e.dump());
        out.push_back(e.get<double>());
      }
      return out;
    };
    rs.short_factor = factors("short_factor");
    rs.long_factor = factors("long_factor");
    rs.factor = s.positive_number_or("factor", 1.0);
    rs.attention_factor = s.positive_number_or("attention_factor", 0.0);
    rs.original_max_position_embeddings = s.positive_or("original_max_position_embeddings", 0);
  } else {
    r.fail(key, "unsupported rope scaling type '" + type +
                    "' (supported: linear, llama3, yarn, dynamic, longrope/su)");
  }
  return rs;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// Mixtral (every layer sparse, always renormalised top-k), Qwen3-MoE and Qwen2-MoE (num_experts,
// moe_intermediate_size, norm_topk_prob, dense layers by decoder_sparse_step and mlp_only_layers;
// Qwen2-MoE adds a sigmoid-gated shared expert of shared_expert_intermediate_size), as
// transformers' MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock / Qwen2MoeSparseMoeBlock and their
// decoder layers read them. router_aux_loss_coef, router_jitter_noise and output_router_logits
// only matter in training.
void parse_mixture_of_experts(const Reader& r, ModelConfig& c) {
  const std::string& a = c.architecture;
  const MoeRule moe = model_family(a).moe;
  const bool mixtral = moe == MoeRule::kMixtral, qwen2_moe = moe == MoeRule::kQwen2Moe;
  const bool qwen_moe = moe == MoeRule::kQwen3Moe || qwen2_moe;
  if (!mixtral && !qwen_moe) return;
  // Shared experts of another shape (DeepSeek's n_shared_experts) are another architecture's; a
  // config that has them would be computed without them.
  for (const char* key : {"shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts"})
    if (r.present(key) && !(r.obj.at(key).is_number() && r.obj.at(key).get<double>() == 0) &&
        !(qwen2_moe && std::string(key) == "shared_expert_intermediate_size"))
      r.fail(key, "shared experts are not supported for " + a + " (got " + r.obj.at(key).dump() + ")");
  // Qwen2MoeConfig's default 5632; 0 (not a shape transformers can build) is read as none.
  if (qwen2_moe)
    c.shared_expert_intermediate_size = r.present("shared_expert_intermediate_size")
                                            ? r.integer("shared_expert_intermediate_size") : 5632;
  if (c.shared_expert_intermediate_size < 0)
    r.fail("shared_expert_intermediate_size", "must not be negative, got " + std::to_string(c.shared_expert_intermediate_size));
  const char* experts_key = mixtral ? "num_local_experts" : "num_experts";
  // transformers' MixtralConfig / Qwen3MoeConfig / Qwen2MoeConfig defaults.
  c.num_experts = r.present(experts_key) ? r.integer(experts_key) : (mixtral ? 8 : qwen2_moe ? 60 : 128);
  if (c.num_experts < 0 || (mixtral && c.num_experts == 0))
    r.fail(experts_key, "must be positive, got " + std::to_string(c.num_experts));
  c.experts_per_token = r.positive_or("num_experts_per_tok", mixtral ? 2 : qwen2_moe ? 4 : 8);
  c.expert_intermediate_size =
      mixtral ? c.intermediate_size : r.positive_or("moe_intermediate_size", qwen2_moe ? 1408 : 768);
  c.norm_topk_prob = mixtral ? true : r.boolean_or("norm_topk_prob", false);
  if (c.num_experts == 0) {  // Qwen-MoE without experts: dense layers throughout
    c.shared_expert_intermediate_size = 0;
    return;
  }
  if (c.experts_per_token > c.num_experts)
    r.fail("num_experts_per_tok", std::to_string(c.experts_per_token) + " exceeds the " +
                                      std::to_string(c.num_experts) + " experts of " + experts_key);
  c.moe_layers.assign(size_t(c.num_layers), true);
  if (qwen_moe) {
    const int64_t step = r.positive_or("decoder_sparse_step", 1);
    for (int64_t i = 0; i < c.num_layers; ++i) c.moe_layers[size_t(i)] = (i + 1) % step == 0;
    if (r.present("mlp_only_layers")) {
      const json& v = r.obj.at("mlp_only_layers");
      if (!v.is_array()) r.fail("mlp_only_layers", "must be a list of layer indices, got " + type_name(v));
      for (const json& e : v) {
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= c.num_layers)
          r.fail("mlp_only_layers", "entries must be layer indices in [0, " + std::to_string(c.num_layers) +
                                        "), got " + e.dump());
        c.moe_layers[size_t(e.get<int64_t>())] = false;
      }
    }
  }
}

void push_unique(std::vector<int32_t>& out, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
}

// The families whose rows allow mlp_bias, for the refusal of the others.
std::string mlp_bias_families() {
  std::string out;
  for (const ModelFamily& f : model_families())
    if (f.mlp_bias) out += (out.empty() ? "" : ", ") + std::string(f.architecture);
  return out;
}

// The architecture family (architectures[0]), its model_type, and how it is quantized.
void parse_architecture(const Reader& r, ModelConfig& c) {
  if (!r.obj.contains("architectures")) r.fail("architectures", "missing");
  const json& arch = r.obj.at("architectures");
  if (!arch.is_array() || arch.empty() || !arch[0].is_string())
    r.fail("architectures", "must be a non-empty list of strings, got " + arch.dump());
  c.architecture = arch[0].get<std::string>();
  const ModelFamily* family = find_model_family(c.architecture);
  if (!family)
    r.fail("architectures",
           "unsupported architecture '" + c.architecture + "' (supported: " + supported_architectures() + ")");
  c.model_type = r.string_or("model_type", family->model_type);

  if (r.present("quantization_config")) c.quantization = parse_quantization_config(r.obj.at("quantization_config"), r.file);
}

// Attention and MLP shapes, and the vocabulary and context they imply.
void parse_shapes(const Reader& r, ModelConfig& c) {
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_layers = r.positive("num_hidden_layers");
  c.num_heads = r.positive("num_attention_heads");
  c.num_kv_heads = r.positive_or("num_key_value_heads", c.num_heads);
  if (r.present("head_dim")) {
    c.head_dim = r.positive("head_dim");
  } else {
    if (c.hidden_size % c.num_heads != 0)
      r.fail("num_attention_heads", std::to_string(c.num_heads) + " does not divide hidden_size " +
                                        std::to_string(c.hidden_size) + " (and there is no head_dim)");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) r.fail("head_dim", "must be even for rotary embeddings, got " + std::to_string(c.head_dim));
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_key_value_heads", "num_attention_heads " + std::to_string(c.num_heads) +
                                      " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
  c.vocab_size = r.positive("vocab_size");
  if (c.vocab_size > std::numeric_limits<int32_t>::max()) r.fail("vocab_size", "too large");
  c.max_position_embeddings = r.positive("max_position_embeddings");
}

// rope_theta and the scaling as written (rope_scaling, or transformers >= 5's rope_parameters);
// what depends on the rest of the config is resolved by resolve_rope_scaling.
void parse_rope(const Reader& r, ModelConfig& c) {
  c.rope_theta = r.positive_number_or("rope_theta", 10000.0);
  c.rope_scaling = parse_rope_scaling(r);
  if (r.present("rope_parameters") && r.obj.at("rope_parameters").is_object()) {
    Reader rp{r.obj.at("rope_parameters"), r.file + ": rope_parameters"};
    c.rope_theta = rp.positive_number_or("rope_theta", c.rope_theta);
    if (!r.present("rope_scaling")) c.rope_scaling = parse_rope_scaling(r, "rope_parameters");
  }
}

// The gated MLP's activation and biases, and no partial rotary embeddings.
void parse_mlp(const Reader& r, ModelConfig& c) {
  const std::string& a = c.architecture;
  const ModelFamily& f = model_family(a);
  // Gemma reads hidden_activation; HF's Gemma configs carry both. Gemma 1's first configs say
  // hidden_act "gelu" and no hidden_activation, which transformers (until its attention refactor)
  // read as gelu_pytorch_tanh, the activation the model was trained with.
  const char* act_key = f.gemma_activation_keys && r.present("hidden_activation") ? "hidden_activation" : "hidden_act";
  if (f.gemma1_gelu && !r.present("hidden_activation"))
    c.hidden_act = "gelu_pytorch_tanh";
  else
    c.hidden_act = r.string_or(act_key, f.activation);
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh")
    r.fail(act_key, "unsupported activation '" + c.hidden_act + "' (silu, gelu_pytorch_tanh)");
  c.mlp_bias = r.boolean_or("mlp_bias", false);
  if (c.mlp_bias && !f.mlp_bias) r.fail("mlp_bias", "MLP biases are supported for " + mlp_bias_families() + " only, not " + a);
  if (r.present("partial_rotary_factor") && r.number("partial_rotary_factor") != 1.0)
    r.fail("partial_rotary_factor", "partial rotary embeddings are not supported (got " +
                                        r.obj.at("partial_rotary_factor").dump() + ")");
}

// Tied embeddings, attention biases, fused projections and q/k norms: fixed by the family or read.
void parse_projections(const Reader& r, ModelConfig& c) {
  const std::string& a = c.architecture;
  const ModelFamily& f = model_family(a);
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", f.tied_embeddings);
  switch (f.attention_bias) {
    case AttentionBiasRule::kAlways: c.attention_bias = true; break;
    // Later Qwen2MoeConfigs can turn them off.
    case AttentionBiasRule::kFromQkvBias: c.attention_bias = r.boolean_or("qkv_bias", true); break;
    case AttentionBiasRule::kNone:
      if (r.boolean_or("attention_bias", false)) r.fail("attention_bias", "attention biases are not supported for " + a);
      break;
    case AttentionBiasRule::kFromConfig: c.attention_bias = r.boolean_or("attention_bias", false); break;
  }
  c.fused_projections = f.fused_projections;
  c.qk_norm = f.qk_norm;
}

// Gemma: (1 + weight) norms and scaled embeddings; Gemma 2/3 add sandwich norms, the score scalar
// and soft caps, Gemma 3 a local rope base. Gemma 1 reads none of those keys (its attention scales
// by head_dim).
void parse_gemma_options(const Reader& r, ModelConfig& c) {
  const ModelFamily& f = model_family(c.architecture);
  if (!f.gemma_norms) return;
  c.norm_plus_one = true;
  c.embedding_scale = std::sqrt(double(c.hidden_size));
  if (!f.sandwich_norms) return;
  c.sandwich_norms = true;
  c.query_pre_attn_scalar = r.positive_number_or("query_pre_attn_scalar", double(c.head_dim));
  c.attn_logit_softcap = r.positive_number_or("attn_logit_softcapping", 0.0);
  c.final_logit_softcap = r.positive_number_or("final_logit_softcapping", 0.0);
  if (f.local_rope_base) c.rope_local_theta = r.positive_number_or("rope_local_base_freq", 10000.0);
}

// The rope scaling's values that depend on the context length, and the context it allows.
void resolve_rope_scaling(const Reader& r, ModelConfig& c) {
  // Longrope (Phi-3): HF turns a sequence by the short factors while it is within
  // original_max_position_embeddings and by the long ones, all of it, once it is longer
  // (rope_long_factors_after); the context is the whole max_position_embeddings.
  if (c.rope_scaling.type == "longrope") {
    RopeScaling& rs = c.rope_scaling;
    const size_t half = size_t(c.head_dim / 2);
    if (rs.short_factor.size() != half || rs.long_factor.size() != half)
      r.fail("rope_scaling", "longrope short_factor and long_factor must have head_dim / 2 = " + std::to_string(half) +
                                 " entries, got " + std::to_string(rs.short_factor.size()) + " and " +
                                 std::to_string(rs.long_factor.size()));
    double factor = rs.factor;
    int64_t orig = c.max_position_embeddings;
    if (r.present("original_max_position_embeddings")) {  // transformers' _compute_longrope_parameters
      orig = r.positive("original_max_position_embeddings");
      factor = double(c.max_position_embeddings) / double(orig);
    } else if (rs.original_max_position_embeddings > 0) {
      orig = rs.original_max_position_embeddings;
      factor = double(c.max_position_embeddings) / double(orig);
    }
    if (rs.attention_factor == 0.0)
      rs.attention_factor = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(double(orig)));
    rs.original_max_position_embeddings = orig;
  }
  if (c.rope_scaling.type == "yarn") {
    RopeScaling& rs = c.rope_scaling;
    if (rs.original_max_position_embeddings == 0) rs.original_max_position_embeddings = c.max_position_embeddings;
    if (rs.attention_factor == 0.0)
      rs.attention_factor = rs.mscale > 0 && rs.mscale_all_dim > 0
                                ? yarn_mscale(rs.factor, rs.mscale) / yarn_mscale(rs.factor, rs.mscale_all_dim)
                                : yarn_mscale(rs.factor, 1.0);
  }
  if (c.rope_scaling.type == "dynamic" && c.rope_scaling.original_max_position_embeddings != 0 &&
      c.rope_scaling.original_max_position_embeddings < c.max_position_embeddings)
    r.fail("rope_scaling", "dynamic NTK with original_max_position_embeddings " +
                               std::to_string(c.rope_scaling.original_max_position_embeddings) +
                               " below max_position_embeddings " + std::to_string(c.max_position_embeddings) +
                               " is not supported (the base would change mid-sequence, under the KV cache)");
}

// Sliding-window attention: which layers use which window, per family.
void parse_sliding_window(const Reader& r, ModelConfig& c) {
  const WindowRule rule = model_family(c.architecture).window;
  if (rule == WindowRule::kEveryLayer) {
    if (r.present("sliding_window")) c.sliding_window = r.positive("sliding_window");
  } else if (rule == WindowRule::kAlternating || rule == WindowRule::kPattern) {
    if (r.present("sliding_window")) {
      c.sliding_window = r.positive("sliding_window");
      // Gemma 2: even layers are local; Gemma 3: all but every sliding_window_pattern-th.
      const int64_t pattern = rule == WindowRule::kAlternating ? 2 : r.positive_or("sliding_window_pattern", 6);
      for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers.push_back((i + 1) % pattern != 0);
      if (r.present("layer_types")) {  // transformers >= 4.53 writes the pattern out
        const json& lt = r.obj.at("layer_types");
        if (!lt.is_array() || int64_t(lt.size()) != c.num_layers)
          r.fail("layer_types", "must be a list of num_hidden_layers strings");
        for (int64_t i = 0; i < c.num_layers; ++i) {
          const json& t = lt[size_t(i)];
          if (t != "sliding_attention" && t != "full_attention")
            r.fail("layer_types", "unknown layer type " + t.dump() + " (sliding_attention, full_attention)");
          c.sliding_layers[size_t(i)] = t == "sliding_attention";
        }
      }
    }
  } else if (rule == WindowRule::kQwen) {
    if (r.boolean_or("use_sliding_window", false) && r.present("sliding_window")) {
      int64_t window = r.positive("sliding_window");
      // HF Qwen2 uses the window only on layers >= max_window_layers.
      int64_t from = r.present("max_window_layers") ? r.integer("max_window_layers") : 0;
      if (from <= 0) {
        c.sliding_window = window;
      } else if (from < c.num_layers) {
        r.fail("max_window_layers", "sliding-window attention on only some layers (from layer " +
                                        std::to_string(from) + " of " + std::to_string(c.num_layers) +
                                        ") is not supported");
      }  // else: no layer uses the window
    }
  }
  if (c.sliding_window >= c.max_position_embeddings) {  // never reached: no window
    c.sliding_window = 0;
    c.sliding_layers.clear();
  }
}

// BOS and EOS ids of config.json and generation_config.json (when given), inside the vocabulary.
void parse_special_tokens(const Reader& r, ModelConfig& c, const std::string& generation_json_text,
                          const std::string& label) {
  c.bos_token_id = r.token_id_or("bos_token_id", -1);
  push_unique(c.eos_token_ids, r.token_ids("eos_token_id"));
  if (!generation_json_text.empty()) {
    const std::string gfile = join_path(label, "generation_config.json");
    const json g = parse_object(generation_json_text, gfile);
    const Reader gr{g, gfile};
    int32_t gbos = gr.token_id_or("bos_token_id", -1);
    if (c.bos_token_id < 0) c.bos_token_id = gbos;
    push_unique(c.eos_token_ids, gr.token_ids("eos_token_id"));
  }
  for (int32_t id : c.eos_token_ids)
    if (id >= c.vocab_size)
      r.fail("eos_token_id", "token id " + std::to_string(id) + " is outside the vocabulary (" +
                                 std::to_string(c.vocab_size) + ")");
  if (c.bos_token_id >= c.vocab_size)
    r.fail("bos_token_id", "token id " + std::to_string(c.bos_token_id) + " is outside the vocabulary");
}

}  // namespace

ModelConfig parse_model_config(const std::string& config_json_text, const std::string& generation_json_text,
                               const std::string& label) {
  const std::string file = join_path(label, "config.json");
  const json j = parse_object(config_json_text, file);
  const Reader r{j, file};
  ModelConfig c;
  // In this order, which is the order a config's errors are reported in.
  parse_architecture(r, c);
  parse_shapes(r, c);
  c.rms_norm_eps = r.positive_number_or("rms_norm_eps", 1e-6);
  parse_rope(r, c);
  parse_mlp(r, c);
  parse_projections(r, c);
  parse_mixture_of_experts(r, c);
  parse_gemma_options(r, c);
  resolve_rope_scaling(r, c);
  parse_sliding_window(r, c);
  parse_special_tokens(r, c, generation_json_text, label);
  c.torch_dtype = r.string_or("torch_dtype", r.string_or("dtype", "float32"));
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec))
    throw Error(model_dir.string() + ": model folder does not exist or is not a folder");
  const auto config_path = model_dir / "config.json";
  if (!std::filesystem::exists(config_path, ec)) throw Error(config_path.string() + ": missing (not a Hugging Face model folder?)");
  std::string config_text = read_text(config_path);
  std::string generation_text;
  const auto gen_path = model_dir / "generation_config.json";
  if (std::filesystem::exists(gen_path, ec)) generation_text = read_text(gen_path);
  return parse_model_config(config_text, generation_text, model_dir.string());
}

int64_t layer_window(const ModelConfig& config, int64_t layer) {
  if (config.sliding_window <= 0) return 0;
  if (config.sliding_layers.empty()) return config.sliding_window;
  return config.sliding_layers.at(size_t(layer)) ? config.sliding_window : 0;
}

double attention_score_scale(const ModelConfig& config) {
  const double base = config.query_pre_attn_scalar > 0 ? config.query_pre_attn_scalar : double(config.head_dim);
  const double af = rope_attention_factor(config);
  return af * af / std::sqrt(base);
}

}  // namespace tpbatch
