#include "tools/fp8_quantizer.h"

#include <algorithm>
#include <cmath>

#include "backend/dtype.h"
#include "common/error.h"

namespace tpbatch {
namespace {

constexpr int64_t kBlock = 128;
constexpr float kFp8Max = 448.0f;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// amax / 448 (int8: / 127), or 1 for an all-zero block (any scale quantizes zeros to zeros).
float scale_for(float amax, float top = kFp8Max) { return amax > 0.0f ? amax / top : 1.0f; }

// w / scale as int8 (its bit pattern): round to nearest even, within [-127, 127].
uint8_t to_int8(float v) { return uint8_t(int8_t(std::clamp(std::nearbyint(v), -127.0f, 127.0f))); }

const char* values_dtype(Fp8Scheme scheme) { return scheme == Fp8Scheme::Int8 ? "I8" : "F8_E4M3"; }

}  // namespace

Fp8Scheme parse_fp8_scheme(const std::string& name) {
  if (name == "fp8-block") return Fp8Scheme::Block;
  if (name == "fp8-channel") return Fp8Scheme::Channel;
  if (name == "int8") return Fp8Scheme::Int8;
  throw Error("make-model: --quantize '" + name + "' is not supported (fp8-block, fp8-channel, int8, awq, gptq, w4a16)");
}

bool fp8_quantizes(const std::string& n) {
  return ends_with(n, "_proj.weight") || ends_with(n, ".w1.weight") || ends_with(n, ".w2.weight") ||
         ends_with(n, ".w3.weight");
}

Fp8Tensor fp8_layout(Fp8Scheme scheme, const std::string& name, int64_t rows, int64_t cols) {
  Fp8Tensor t;
  const std::string stem = name.substr(0, name.size() - std::string("weight").size());
  if (scheme == Fp8Scheme::Block) {
    t.scale_name = stem + "weight_scale_inv";
    t.scale_shape = {(rows + kBlock - 1) / kBlock, (cols + kBlock - 1) / kBlock};
    t.scale_dtype = "F32";
  } else {
    t.scale_name = stem + "weight_scale";
    t.scale_shape = {rows, 1};
    t.scale_dtype = "BF16";
  }
  return t;
}

Fp8Tensor quantize_fp8(Fp8Scheme scheme, const std::string& name, const float* w, int64_t rows, int64_t cols) {
  Fp8Tensor t = fp8_layout(scheme, name, rows, cols);
  t.values.resize(size_t(rows * cols));
  if (scheme == Fp8Scheme::Block) {
    const int64_t sc = t.scale_shape[1];
    t.scales.assign(size_t(t.scale_shape[0] * sc), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float& amax = t.scales[size_t((r / kBlock) * sc + c / kBlock)];
        amax = std::max(amax, std::fabs(w[r * cols + c]));
      }
    for (float& s : t.scales) s = scale_for(s);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        t.values[size_t(r * cols + c)] = f32_to_f8e4m3(w[r * cols + c] / t.scales[size_t((r / kBlock) * sc + c / kBlock)]);
  } else {
    t.scales.resize(size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
      float amax = 0.0f;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      // Stored as BF16: quantize with the scale as stored, so the loader multiplies by the same one.
      const bool int8 = scheme == Fp8Scheme::Int8;
      const float s = bf16_to_f32(f32_to_bf16(scale_for(amax, int8 ? 127.0f : kFp8Max)));
      t.scales[size_t(r)] = s;
      for (int64_t c = 0; c < cols; ++c)
        t.values[size_t(r * cols + c)] = int8 ? to_int8(w[r * cols + c] / s) : f32_to_f8e4m3(w[r * cols + c] / s);
    }
  }
  return t;
}

std::vector<float> dequantize_fp8(Fp8Scheme scheme, const Fp8Tensor& q, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scheme == Fp8Scheme::Block ? q.scales[size_t((r / kBlock) * q.scale_shape[1] + c / kBlock)]
                                                 : q.scales[size_t(r)];
      const uint8_t v = q.values[size_t(r * cols + c)];
      out[size_t(r * cols + c)] = (scheme == Fp8Scheme::Int8 ? float(int8_t(v)) : f8e4m3_to_f32(v)) * s;
    }
  return out;
}

void fp8_header_entries(nlohmann::json& header, uint64_t& offset, Fp8Scheme scheme, const std::string& name,
                        const std::vector<int64_t>& shape, bool dequantize) {
  const uint64_t numel = uint64_t(shape[0]) * uint64_t(shape[1]);
  auto entry = [&](const std::string& n, const char* dtype, const std::vector<int64_t>& sh, uint64_t bytes) {
    header[n] = {{"dtype", dtype}, {"shape", sh}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  if (dequantize) return entry(name, "F32", shape, numel * 4);
  const Fp8Tensor t = fp8_layout(scheme, name, shape[0], shape[1]);
  entry(name, values_dtype(scheme), shape, numel);
  uint64_t scales = 1;
  for (int64_t d : t.scale_shape) scales *= uint64_t(d);
  entry(t.scale_name, t.scale_dtype, t.scale_shape, scales * (std::string(t.scale_dtype) == "F32" ? 4 : 2));
}

std::vector<unsigned char> fp8_file_bytes(Fp8Scheme scheme, const std::string& name, const float* w, int64_t rows,
                                          int64_t cols, bool dequantize) {
  const Fp8Tensor q = quantize_fp8(scheme, name, w, rows, cols);
  std::vector<unsigned char> out;
  auto append = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    out.insert(out.end(), b, b + n);
  };
  if (dequantize) {
    const std::vector<float> d = dequantize_fp8(scheme, q, rows, cols);
    append(d.data(), d.size() * 4);
    return out;
  }
  append(q.values.data(), q.values.size());
  if (std::string(q.scale_dtype) == "F32") {
    append(q.scales.data(), q.scales.size() * 4);
  } else {
    for (float s : q.scales) {
      const uint16_t h = f32_to_bf16(s);
      append(&h, 2);
    }
  }
  return out;
}

nlohmann::ordered_json fp8_quantization_config(Fp8Scheme scheme) {
  using nlohmann::ordered_json;
  if (scheme == Fp8Scheme::Block)
    return {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  // int8: llm-compressor's W8A8 preset as RedHatAI's *-quantized.w8a8 configs show it.
  const char* type = scheme == Fp8Scheme::Int8 ? "int" : "float";
  const ordered_json weights = {{"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", false},
                                {"group_size", nullptr}, {"num_bits", 8}, {"observer", "minmax"},
                                {"observer_kwargs", ordered_json::object()}, {"strategy", "channel"},
                                {"symmetric", true}, {"type", type}};
  const ordered_json inputs = {{"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", true},
                               {"group_size", nullptr}, {"num_bits", 8}, {"observer", nullptr},
                               {"observer_kwargs", ordered_json::object()}, {"strategy", "token"},
                               {"symmetric", true}, {"type", type}};
  ordered_json group = {{"input_activations", inputs}, {"output_activations", nullptr},
                        {"targets", {"Linear"}}, {"weights", weights}};
  return {{"config_groups", {{"group_0", group}}},
          {"format", scheme == Fp8Scheme::Int8 ? "int-quantized" : "float-quantized"},
          {"ignore", {"lm_head"}},
          {"kv_cache_scheme", nullptr},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"}};
}

}  // namespace tpbatch
