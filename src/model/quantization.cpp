#include "model/quantization.h"

#include <cctype>
#include <map>
#include <mutex>
#include <regex>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tpbatch {
namespace {

using nlohmann::json;

struct QuantReader {
  const json& obj;
  std::string file, prefix;  // prefix: "quantization_config." or a nested group's path

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(file + ": key '" + prefix + key + "': " + why);
  }
  std::string string(const std::string& key) const {
    if (!obj.contains(key)) fail(key, "missing");
    if (!obj.at(key).is_string()) fail(key, "must be a string, got " + obj.at(key).dump());
    return obj.at(key).get<std::string>();
  }
  int64_t integer(const std::string& key) const {
    if (!obj.contains(key)) fail(key, "missing");
    if (!obj.at(key).is_number_integer()) fail(key, "must be an integer, got " + obj.at(key).dump());
    return obj.at(key).get<int64_t>();
  }
  // A [rows, cols] pair of positive integers (weight_block_size, block_structure).
  void block(const std::string& key, QuantizationConfig& q) const {
    const json& v = obj.at(key);
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
        v[0].get<int64_t>() <= 0 || v[1].get<int64_t>() <= 0)
      fail(key, "must be two positive integers [rows, columns], got " + v.dump());
    q.granularity = ScaleGranularity::Block;
    q.block_rows = v[0].get<int64_t>();
    q.block_cols = v[1].get<int64_t>();
  }
  std::vector<std::string> names(const std::string& key) const {
    std::vector<std::string> out;
    if (!obj.contains(key) || obj.at(key).is_null()) return out;
    const json& v = obj.at(key);
    if (!v.is_array()) fail(key, "must be a list of module names, got " + v.dump());
    for (const json& e : v) {
      if (!e.is_string()) fail(key, "must be a list of module names, got " + v.dump());
      out.push_back(e.get<std::string>());
    }
    return out;
  }
};

// quant_method fp8 (transformers' FineGrainedFP8Config): e4m3 values, 2-D block scales.
void parse_fp8(const QuantReader& r, QuantizationConfig& q) {
  if (r.obj.contains("fmt") && r.string("fmt") != "e4m3")
    r.fail("fmt", "'" + r.string("fmt") + "' is not supported (supported: e4m3)");
  if (!r.obj.contains("weight_block_size") || r.obj.at("weight_block_size").is_null())
    r.fail("weight_block_size", "missing: fp8 checkpoints without block scales are not supported (per-tensor and "
                                "per-channel fp8 come as quant_method compressed-tensors)");
  r.block("weight_block_size", q);
  q.ignore = r.names("modules_to_not_convert");
  q.ignore_by_part = true;
}

// A 4-bit group size: positive, or -1 for one group per row.
void int4_group(const QuantReader& r, const std::string& key, QuantizationConfig& q) {
  const int64_t g = r.integer(key);
  if (g == 0 || g < -1) r.fail(key, "must be a positive number of input columns or -1, got " + std::to_string(g));
  q.bits = 4;
  q.group_size = g;
  if (g > 0) {
    q.granularity = ScaleGranularity::Block;
    q.block_rows = 1;
    q.block_cols = g;
  } else {
    q.granularity = ScaleGranularity::Channel;
  }
}

void four_bits(const QuantReader& r, const std::string& key) {
  const int64_t bits = r.integer(key);
  if (bits != 4) r.fail(key, std::to_string(bits) + "-bit weights are not supported (supported: 4)");
}

bool boolean_or(const QuantReader& r, const std::string& key, bool fallback) {
  if (!r.obj.contains(key) || r.obj.at(key).is_null()) return fallback;
  if (!r.obj.at(key).is_boolean()) r.fail(key, "must be true or false, got " + r.obj.at(key).dump());
  return r.obj.at(key).get<bool>();
}

std::string lower_string_or(const QuantReader& r, const std::string& key, const std::string& fallback) {
  if (!r.obj.contains(key) || r.obj.at(key).is_null()) return fallback;
  std::string v = r.string(key);
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

// AutoAWQ: version gemm (qweight [K, N/8] in the 0,2,4,6,1,3,5,7 order), zero points always.
void parse_awq(const QuantReader& r, QuantizationConfig& q) {
  four_bits(r, r.obj.contains("bits") ? "bits" : "w_bit");
  int4_group(r, r.obj.contains("group_size") ? "group_size" : "q_group_size", q);
  const std::string version = lower_string_or(r, "version", "gemm");
  if (version != "gemm") r.fail("version", "'" + version + "' packing is not supported (supported: gemm)");
  if (!boolean_or(r, "zero_point", true)) r.fail("zero_point", "false (no zero points) is not supported");
  q.packing = Int4Packing::Awq;
  q.ignore = r.names("modules_to_not_convert");
  q.ignore_by_part = true;
}

// AutoGPTQ / GPTQModel: qweight [K/8, N], qzeros [K/g, N/8] (zero - 1 unless checkpoint_format
// gptq_v2), scales [K/g, N], g_idx [K].
void parse_gptq(const QuantReader& r, QuantizationConfig& q) {
  four_bits(r, "bits");
  int4_group(r, "group_size", q);
  if (boolean_or(r, "is_marlin_format", false)) r.fail("is_marlin_format", "the marlin packing is not supported");
  const std::string key = r.obj.contains("checkpoint_format") ? "checkpoint_format" : "format";
  const std::string format = lower_string_or(r, key, "gptq");
  if (format != "gptq" && format != "gptq_v2")
    r.fail(key, "'" + format + "' is not supported (supported: gptq, gptq_v2)");
  q.zeros_minus_one = format == "gptq";
  q.desc_act = boolean_or(r, "desc_act", false);
  q.packing = Int4Packing::Gptq;
  q.ignore = r.names("modules_to_not_convert");
  q.ignore_by_part = true;
}

// compressed-tensors W4A16: weight_packed [N, K/8] (value + 8, 8 a word from the low nibble),
// weight_scale [N, K/g], weight_shape [2]; symmetric only.
void parse_pack_quantized(const QuantReader& r, const QuantReader& w, QuantizationConfig& q) {
  const std::string format = r.obj.contains("format") ? r.string("format") : "";
  if (format != "pack-quantized")
    r.fail("format", "'" + format + "' with 4-bit integer weights is not supported (supported: pack-quantized)");
  const std::string strategy = w.string("strategy");
  if (strategy == "group") {
    int4_group(w, "group_size", q);
  } else if (strategy == "channel") {
    q.bits = 4;
    q.group_size = -1;
    q.granularity = ScaleGranularity::Channel;
  } else {
    w.fail("strategy", "'" + strategy + "' is not supported for 4-bit weights (supported: group, channel)");
  }
  if (!boolean_or(w, "symmetric", true))
    w.fail("symmetric", "false (asymmetric 4-bit weights with weight_zero_point) is not supported yet");
  if (w.obj.contains("actorder") && !w.obj.at("actorder").is_null()) {
    const json& a = w.obj.at("actorder");
    if (!(a.is_boolean() && !a.get<bool>()) && !(a.is_string() && (a == "weight" || a == "static")))
      w.fail("actorder", a.dump() + " (a stored weight_g_idx) is not supported (supported: null, weight)");
  }
  q.packing = Int4Packing::PackQuantized;
}

// compressed-tensors W8A8 INT8 (llm-compressor's W8A8 scheme, e.g. RedHatAI's "*-quantized.w8a8"
// models: format int-quantized, weights {type int, num_bits 8, strategy channel, symmetric true},
// input_activations {type int, num_bits 8, strategy token, dynamic true, symmetric true}); the
// tensors as vLLM's compressed_tensors_w8a8_int8.py creates them: int8 weight [N, K], weight_scale
// [N, 1] per channel or one per tensor. Only what runs here is accepted, the rest named.
void parse_int8(const QuantReader& r, const QuantReader& w, const json& group, const std::string& gpath,
                QuantizationConfig& q) {
  const QuantReader g{group, r.file, gpath};
  const QuantReader& fr = group.contains("format") && !group.at("format").is_null() ? g : r;
  const std::string format = fr.obj.contains("format") && !fr.obj.at("format").is_null() ? fr.string("format") : "";
  if (format != "int-quantized")
    fr.fail("format", "'" + format + "' with 8-bit integer weights is not supported (supported: int-quantized)");
  const std::string strategy = w.string("strategy");
  if (strategy == "channel")
    q.granularity = ScaleGranularity::Channel;
  else if (strategy == "tensor")
    q.granularity = ScaleGranularity::Tensor;
  else
    w.fail("strategy", "'" + strategy + "' is not supported for 8-bit integer weights (supported: channel, tensor)");
  if (!boolean_or(w, "symmetric", true))
    w.fail("symmetric", "false (asymmetric int8 weights with weight_zero_point) is not supported");
  if (!group.contains("input_activations") || !group.at("input_activations").is_object())
    g.fail("input_activations", "missing: int8 weights need dynamic per-token int8 activations (W8A8); "
                                "16-bit activations (W8A16) are not supported");
  const QuantReader a{group.at("input_activations"), r.file, gpath + "input_activations."};
  const std::string atype = a.string("type");
  const int64_t abits = a.integer("num_bits");
  if (atype != "int" || abits != 8)
    a.fail("type", "'" + atype + "' with num_bits " + std::to_string(abits) + " is not supported with int8 weights "
                   "(supported: int with num_bits 8)");
  const std::string astrategy = a.string("strategy");
  if (astrategy != "token")
    a.fail("strategy", "'" + astrategy + "' is not supported (supported: token, dynamic)");
  if (!boolean_or(a, "dynamic", false))
    a.fail("dynamic", "false (static input_scale tensors) is not supported (supported: dynamic per-token scales)");
  if (!boolean_or(a, "symmetric", true))
    a.fail("symmetric", "false (asymmetric activations with a zero point) is not supported");
  q.int8 = true;
}

// compressed-tensors (llm-compressor): one config group whose weights say what the scales are.
void parse_compressed_tensors(const QuantReader& r, QuantizationConfig& q) {
  q.ignore = r.names("ignore");
  for (const std::string& entry : q.ignore) {
    if (entry.rfind("re:", 0) != 0) continue;
    try {
      std::regex check(entry.substr(3));
    } catch (const std::regex_error& e) {
      r.fail("ignore", "'" + entry + "' is not a regular expression we can read: " + e.what());
    }
  }
  if (!r.obj.contains("config_groups") || !r.obj.at("config_groups").is_object() || r.obj.at("config_groups").empty())
    r.fail("config_groups", "missing or not an object of quantization groups");
  const json& groups = r.obj.at("config_groups");
  if (groups.size() != 1)
    r.fail("config_groups", "has " + std::to_string(groups.size()) + " groups; one quantization scheme per model is supported");
  const std::string gname = groups.begin().key();
  const json& group = groups.begin().value();
  const std::string gpath = r.prefix + "config_groups." + gname + ".";
  if (!group.is_object() || !group.contains("weights") || !group.at("weights").is_object())
    throw Error(r.file + ": key '" + gpath + "weights': missing or not an object");
  const QuantReader w{group.at("weights"), r.file, gpath + "weights."};
  const std::string type = w.string("type");
  const int64_t bits = w.integer("num_bits");
  if (type == "int" && bits == 8) return parse_int8(r, w, group, gpath, q);
  if (type == "int" && bits == 4) return parse_pack_quantized(r, w, q);
  if (type != "float" || bits != 8)
    w.fail("type", "'" + type + "' with num_bits " + std::to_string(bits) +
                       " is not supported (supported: float or int with num_bits 8, int with num_bits 4)");
  const std::string strategy = w.string("strategy");
  if (strategy == "tensor") {
    q.granularity = ScaleGranularity::Tensor;
  } else if (strategy == "channel") {
    q.granularity = ScaleGranularity::Channel;
  } else if (strategy == "block") {
    if (!w.obj.contains("block_structure")) w.fail("block_structure", "missing (strategy block)");
    w.block("block_structure", q);
  } else {
    w.fail("strategy", "'" + strategy + "' is not supported (supported: tensor, channel, block)");
  }
}

// "re:" patterns compiled once: plan asks about every projection of every layer for every layout.
const std::regex& ignore_pattern(const std::string& pattern) {
  static std::mutex mutex;
  static std::map<std::string, std::regex> compiled;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = compiled.find(pattern);
  if (it == compiled.end()) it = compiled.emplace(pattern, std::regex(pattern)).first;
  return it->second;
}

}  // namespace

bool QuantizationConfig::leaves_unquantized(const std::string& module) const {
  for (const std::string& entry : ignore) {
    if (ignore_by_part) {
      if (!entry.empty() && module.find(entry) != std::string::npos) return true;
    } else if (entry.rfind("re:", 0) == 0) {
      if (std::regex_search(module, ignore_pattern(entry.substr(3)), std::regex_constants::match_continuous))
        return true;
    } else if (entry == module) {
      return true;
    }
  }
  return false;
}

std::string QuantizationConfig::scale_tensor_name(const std::string& weight_name) const {
  const std::string suffix = method == "fp8" ? "weight_scale_inv" : "weight_scale";
  const std::string tail = "weight";
  if (weight_name.size() >= tail.size() && weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) == 0)
    return weight_name.substr(0, weight_name.size() - tail.size()) + suffix;
  return weight_name + "_" + suffix;
}

std::vector<int64_t> QuantizationConfig::scale_shape(int64_t rows, int64_t cols) const {
  switch (granularity) {
    case ScaleGranularity::Tensor: return {1};
    case ScaleGranularity::Channel: return {rows, 1};
    case ScaleGranularity::Block: break;
  }
  return {(rows + block_rows - 1) / block_rows, (cols + block_cols - 1) / block_cols};
}

bool QuantizationConfig::scale_shape_matches(const std::vector<int64_t>& shape, int64_t rows, int64_t cols) const {
  if (shape == scale_shape(rows, cols)) return true;
  if (granularity == ScaleGranularity::Tensor) return shape.empty();
  if (granularity == ScaleGranularity::Channel) return shape == std::vector<int64_t>{rows};
  return false;
}

std::string QuantizationConfig::describe() const {
  std::string g = granularity == ScaleGranularity::Tensor    ? "per tensor"
                  : granularity == ScaleGranularity::Channel ? "per channel"
                                                             : "block " + std::to_string(block_rows) + "x" +
                                                                   std::to_string(block_cols);
  if (int4())
    return method + ": int4 values, zero points and scales " +
           (group_size > 0 ? "per group of " + std::to_string(group_size) : std::string("per channel"));
  if (int8) return method + ": int8 values, scales " + g + ", activations int8 per token";
  return method + ": e4m3 values, scales " + g;
}

QuantizationConfig parse_quantization_config(const json& obj, const std::string& file) {
  if (!obj.is_object()) throw Error(file + ": key 'quantization_config': must be an object, got " + obj.dump());
  const QuantReader r{obj, file, "quantization_config."};
  QuantizationConfig q;
  q.method = r.string("quant_method");
  if (q.method == "fp8") {
    parse_fp8(r, q);
  } else if (q.method == "compressed-tensors") {
    parse_compressed_tensors(r, q);
  } else if (q.method == "awq") {
    parse_awq(r, q);
  } else if (q.method == "gptq") {
    parse_gptq(r, q);
  } else {
    r.fail("quant_method", "unsupported quantization '" + q.method + "' (supported: fp8, compressed-tensors, awq, gptq)");
  }
  return q;
}

}  // namespace tpbatch
