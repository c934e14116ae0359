#include "tools/int4_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/dtype.h"
#include "common/error.h"

namespace tpbatch {
namespace {

constexpr int64_t kG = kInt4GroupSize;
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // output column 8j + kAwqOrder[i] in nibble i

// One weight quantized: codes [rows][cols] in [0, 15], and per (row, group) the stored scale and zero.
struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zeros;  // [rows][cols / kG]
};

float stored_scale(Int4Scheme s, float x) {
  if (!(x > 0.0f)) x = 1.0f;  // an all-zero group: any scale quantizes it to zeros
  return s == Int4Scheme::W4A16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
}

Quantized quantize(Int4Scheme scheme, const float* w, int64_t rows, int64_t cols) {
  const int64_t G = cols / kG;
  Quantized q;
  q.codes.resize(size_t(rows * cols));
  q.scales.resize(size_t(rows * G));
  q.zeros.resize(size_t(rows * G));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < G; ++j) {
      const float* v = w + r * cols + j * kG;
      float mn = 0.0f, mx = 0.0f, amax = 0.0f;
      for (int64_t c = 0; c < kG; ++c) mn = std::min(mn, v[c]), mx = std::max(mx, v[c]), amax = std::max(amax, std::fabs(v[c]));
      float s = 0.0f, z = 8.0f;
      if (scheme == Int4Scheme::Awq) {
        s = stored_scale(scheme, (mx - mn) / 15.0f);
        z = std::clamp(-std::nearbyint(mn / s), 0.0f, 15.0f);
      } else {
        s = stored_scale(scheme, scheme == Int4Scheme::Gptq ? 2.0f * amax / 15.0f : amax / 7.5f);
      }
      for (int64_t c = 0; c < kG; ++c)
        q.codes[size_t(r * cols + j * kG + c)] = uint8_t(std::clamp(std::nearbyint(v[c] / s) + z, 0.0f, 15.0f));
      q.scales[size_t(r * G + j)] = s;
      q.zeros[size_t(r * G + j)] = z;
    }
  return q;
}

struct Entry {
  std::string name;
  const char* dtype;
  std::vector<int64_t> shape;
  uint64_t bytes;
};

std::vector<Entry> layout(Int4Scheme scheme, const std::string& name, int64_t N, int64_t K) {
  if (K % kG != 0 || N % 8 != 0)
    throw Error("make-model: tensor '" + name + "' [" + std::to_string(N) + ", " + std::to_string(K) +
                "]: 4-bit formats need input widths that are multiples of the group size " + std::to_string(kG) +
                " and output widths of 8 (choose --hidden-size, --intermediate-size and --head-dim so)");
  const std::string stem = name.substr(0, name.size() - std::string("weight").size());
  const int64_t G = K / kG;
  const uint64_t n = uint64_t(N), k = uint64_t(K), g = uint64_t(G);
  switch (scheme) {
    case Int4Scheme::Awq:
      return {{stem + "qweight", "I32", {K, N / 8}, k * n / 2},
              {stem + "qzeros", "I32", {G, N / 8}, g * n / 2},
              {stem + "scales", "F16", {G, N}, g * n * 2}};
    case Int4Scheme::Gptq:
      return {{stem + "qweight", "I32", {K / 8, N}, k * n / 2},
              {stem + "qzeros", "I32", {G, N / 8}, g * n / 2},
              {stem + "scales", "F16", {G, N}, g * n * 2},
              {stem + "g_idx", "I32", {K}, k * 4}};
    case Int4Scheme::W4A16: break;
  }
  return {{stem + "weight_packed", "I32", {N, K / 8}, n * k / 2},
          {stem + "weight_scale", "BF16", {N, G}, n * g * 2},
          {stem + "weight_shape", "I64", {2}, 16}};
}

template <typename T>
void append(std::vector<unsigned char>& out, const std::vector<T>& v) {
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  out.insert(out.end(), b, b + v.size() * sizeof(T));
}

void append_half(std::vector<unsigned char>& out, const std::vector<float>& v, bool bf16) {
  for (float f : v) {
    const uint16_t h = bf16 ? f32_to_bf16(f) : f32_to_f16(f);
    out.push_back(uint8_t(h & 0xff));
    out.push_back(uint8_t(h >> 8));
  }
}

// Scales or zeros [rows][G] as the checkpoint's [G][rows].
std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t G) {
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < G; ++j) t[size_t(j * rows + r)] = v[size_t(r * G + j)];
  return t;
}

}  // namespace

bool parse_int4_scheme(const std::string& name, Int4Scheme& scheme) {
  if (name == "awq") scheme = Int4Scheme::Awq;
  else if (name == "gptq") scheme = Int4Scheme::Gptq;
  else if (name == "w4a16") scheme = Int4Scheme::W4A16;
  else return false;
  return true;
}

void int4_header_entries(nlohmann::json& header, uint64_t& offset, Int4Scheme scheme, const std::string& name,
                         const std::vector<int64_t>& shape, bool dequantize) {
  const std::vector<Entry> entries = layout(scheme, name, shape[0], shape[1]);  // checks the shape either way
  auto entry = [&](const std::string& n, const char* dtype, const std::vector<int64_t>& sh, uint64_t bytes) {
    header[n] = {{"dtype", dtype}, {"shape", sh}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  if (dequantize) return entry(name, "F32", shape, uint64_t(shape[0]) * uint64_t(shape[1]) * 4);
  for (const Entry& e : entries) entry(e.name, e.dtype, e.shape, e.bytes);
}

std::vector<unsigned char> int4_file_bytes(Int4Scheme scheme, const std::string& name, const float* w, int64_t N,
                                           int64_t K, bool dequantize) {
  layout(scheme, name, N, K);
  const Quantized q = quantize(scheme, w, N, K);
  const int64_t G = K / kG;
  std::vector<unsigned char> out;
  auto code = [&](int64_t n, int64_t k) { return uint32_t(q.codes[size_t(n * K + k)]); };
  if (dequantize) {  // (q - zero) * scale in fp32, as the GEMM dequantizes
    std::vector<float> d(size_t(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = size_t(n * G + k / kG);
        d[size_t(n * K + k)] = (float(code(n, k)) - q.zeros[i]) * q.scales[i];
      }
    append(out, d);
    return out;
  }
  if (scheme == Int4Scheme::W4A16) {
    std::vector<int32_t> packed(size_t(N * K / 8), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) packed[size_t(n * (K / 8) + k / 8)] |= int32_t(code(n, k) << (4 * (k % 8)));
    append(out, packed);
    append_half(out, q.scales, true);
    append(out, std::vector<int64_t>{N, K});
    return out;
  }
  std::vector<int32_t> qweight(size_t(K * N / 8), 0), qzeros(size_t(G * N / 8), 0);
  const bool awq = scheme == Int4Scheme::Awq;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      if (awq) {
        const int nib = int(std::find(kAwqOrder, kAwqOrder + 8, int(n % 8)) - kAwqOrder);
        qweight[size_t(k * (N / 8) + n / 8)] |= int32_t(code(n, k) << (4 * nib));
      } else {
        qweight[size_t((k / 8) * N + n)] |= int32_t(code(n, k) << (4 * (k % 8)));
      }
    }
  for (int64_t j = 0; j < G; ++j)
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t z = uint32_t(q.zeros[size_t(n * G + j)]) - (awq ? 0u : 1u);  // gptq stores zero - 1
      const int nib = awq ? int(std::find(kAwqOrder, kAwqOrder + 8, int(n % 8)) - kAwqOrder) : int(n % 8);
      qzeros[size_t(j * (N / 8) + n / 8)] |= int32_t((z & 0xfu) << (4 * nib));
    }
  append(out, qweight);
  append(out, qzeros);
  append_half(out, transposed(q.scales, N, G), false);
  if (!awq) {
    std::vector<int32_t> g_idx(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) g_idx[size_t(k)] = int32_t(k / kG);
    append(out, g_idx);
  }
  return out;
}

nlohmann::ordered_json int4_quantization_config(Int4Scheme scheme) {
  using nlohmann::ordered_json;
  if (scheme == Int4Scheme::Awq)
    return {{"bits", 4}, {"group_size", kG}, {"modules_to_not_convert", nullptr}, {"quant_method", "awq"},
            {"version", "gemm"}, {"zero_point", true}};
  if (scheme == Int4Scheme::Gptq)
    return {{"bits", 4}, {"checkpoint_format", "gptq"}, {"damp_percent", 0.01}, {"desc_act", false},
            {"group_size", kG}, {"model_file_base_name", nullptr}, {"model_name_or_path", nullptr},
            {"quant_method", "gptq"}, {"static_groups", false}, {"sym", true}, {"true_sequential", true}};
  const ordered_json weights = {{"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", false},
                                {"group_size", kG}, {"num_bits", 4}, {"observer", "minmax"},
                                {"observer_kwargs", ordered_json::object()}, {"strategy", "group"},
                                {"symmetric", true}, {"type", "int"}};
  const ordered_json group = {{"input_activations", nullptr}, {"output_activations", nullptr},
                              {"targets", {"Linear"}}, {"weights", weights}};
  return {{"config_groups", {{"group_0", group}}},
          {"format", "pack-quantized"},
          {"ignore", {"lm_head"}},
          {"kv_cache_scheme", nullptr},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"}};
}

}  // namespace tpbatch
