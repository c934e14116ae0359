#include "model/int4_checkpoint.h"

#include <algorithm>

#include "common/error.h"

namespace tpbatch {
namespace {

// The nibble of an AWQ word that holds output column 8j + c (the inverse of 0,2,4,6,1,3,5,7).
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The packed tensors of one weight, by role.
struct PackedNames {
  std::string values, zeros, scales, g_idx;
};

PackedNames packed_names(const QuantizationConfig& q, const std::string& stem) {
  if (q.packing == Int4Packing::PackQuantized) return {stem + "weight_packed", "", stem + "weight_scale", ""};
  return {stem + "qweight", stem + "qzeros", stem + "scales", q.packing == Int4Packing::Gptq ? stem + "g_idx" : ""};
}

const char* values_suffix(const QuantizationConfig& q) {
  return q.packing == Int4Packing::PackQuantized ? "weight_packed" : "qweight";
}

// Checks a companion tensor's presence, dtype and shape; errors name it and the weight it serves.
const TensorInfo& expect_tensor(const WeightStore& w, const QuantizationConfig& q, const std::string& name,
                                const char* role, const std::string& weight, bool is_int,
                                const std::vector<int64_t>& shape) {
  if (!w.has(name))
    throw Error("tensor '" + name + "' is missing: the " + role + " of 4-bit weight '" + weight + "' (" +
                q.describe() + ")");
  const TensorInfo& t = w.tensor(name);
  const bool int_ok = t.dtype == DType::I32;
  const bool float_ok = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16;
  if (is_int ? !int_ok : !float_ok)
    throw Error(t.file + ": tensor '" + name + "': dtype " + dtype_name(t.dtype) + " but the " + role + " of '" +
                weight + "' are " + (is_int ? "I32 words" : "F16, BF16 or F32") + " (" + q.describe() + ")");
  if (t.shape != shape)
    throw Error(t.file + ": tensor '" + name + "': shape " + shape_text(t.shape) + " but the " + role + " of '" +
                weight + "' are " + shape_text(shape) +
                " (" + q.describe() + ")");
  return t;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Raw I32 words of a block of a 2-D tensor.
std::vector<int32_t> words(const WeightStore& w, const std::string& name, int64_t r0, int64_t nr, int64_t c0,
                           int64_t nc) {
  std::vector<int32_t> out(size_t(nr * nc));
  w.read(name, r0, nr, c0, nc, DType::I32, out.data());
  return out;
}

// GPTQ's g_idx must send column c to group c / g: act-order checkpoints store another order.
void check_g_idx(const WeightStore& w, const QuantizationConfig& q, const std::string& name, const std::string& weight,
                 int64_t K, int64_t g) {
  if (!w.has(name)) return;
  const TensorInfo& t = expect_tensor(w, q, name, "group index", weight, true, {K});
  std::vector<int32_t> idx(static_cast<size_t>(K));
  w.read(name, 0, 1, 0, K, DType::I32, idx.data());
  for (int64_t c = 0; c < K; ++c)
    if (idx[size_t(c)] != c / g)
      throw Error(t.file + ": tensor '" + name + "': column " + std::to_string(c) + " is in group " +
                  std::to_string(idx[size_t(c)]) + ", not " + std::to_string(c / g) +
                  (q.desc_act ? " (quantization_config.desc_act: true)" : "") +
                  ": act-order (desc_act) layouts are not supported; quantize with desc_act false");
}

}  // namespace

void add_int4_weights(WeightStore& w, const QuantizationConfig& q) {
  if (!q.int4()) return;
  const std::string suffix = values_suffix(q);
  for (const std::string& name : w.names()) {
    if (!ends_with(name, "." + suffix)) continue;
    const TensorInfo& t = w.tensor(name);
    const std::string stem = name.substr(0, name.size() - suffix.size());
    if (t.dtype != DType::I32 || t.shape.size() != 2)
      throw Error(t.file + ": tensor '" + name + "': " + dtype_name(t.dtype) + " " + shape_text(t.shape) +
                  " but 4-bit values come packed in 2-D I32 words (" + q.describe() + ")");
    int64_t N = 0, K = 0;
    if (q.packing == Int4Packing::Awq) {
      K = t.shape[0], N = t.shape[1] * 8;
    } else if (q.packing == Int4Packing::Gptq) {
      K = t.shape[0] * 8, N = t.shape[1];
    } else {
      N = t.shape[0], K = t.shape[1] * 8;
      const std::string shape_name = stem + "weight_shape";
      if (w.has(shape_name)) {
        const TensorInfo& s = w.tensor(shape_name);
        if (s.dtype != DType::I64 || s.shape != std::vector<int64_t>{2})
          throw Error(s.file + ": tensor '" + shape_name + "': " + dtype_name(s.dtype) + " " + shape_text(s.shape) +
                      " but a weight's shape is I64 [2]");
        int64_t nk[2];
        w.read(shape_name, 0, 1, 0, 2, DType::I64, nk);
        if (nk[0] != N || nk[1] <= 0 || ceil_div(nk[1], 8) != t.shape[1])
          throw Error(s.file + ": tensor '" + shape_name + "': [" + std::to_string(nk[0]) + ", " +
                      std::to_string(nk[1]) + "] does not fit '" + name + "' " + shape_text(t.shape));
        K = nk[1];
      }
    }
    if (q.group_size > 0 && K % q.group_size != 0)
      throw Error(t.file + ": tensor '" + name + "': its " + std::to_string(K) +
                  " input columns are not a multiple of key 'quantization_config.group_size' (" +
                  std::to_string(q.group_size) + ")");
    TensorInfo logical;
    logical.name = stem + "weight";
    logical.dtype = DType::I4;
    logical.shape = {N, K};
    logical.file = t.file;
    w.add_logical(logical);
  }
}

Int4Slice read_int4_slice(const WeightStore& w, const QuantizationConfig& q, const TensorInfo& weight, int64_t row0,
                          int64_t nrows, int64_t col0, int64_t ncols) {
  const std::string& name = weight.name;
  const int64_t N = weight.shape[0], K = weight.shape[1];
  const int64_t g = q.group_size > 0 ? q.group_size : K, G = K / g;
  const PackedNames pn = packed_names(q, name.substr(0, name.size() - std::string("weight").size()));
  Int4Slice s;
  s.group = g;
  s.phase = col0 % g;
  s.groups = nrows > 0 && ncols > 0 ? (s.phase + ncols + g - 1) / g : 1;
  const int64_t g0 = col0 / g, ng = s.groups, rb = (ncols + 1) / 2;
  s.values.assign(size_t(nrows * rb), 0);
  s.scales.assign(size_t(nrows * ng), 0.0f);
  s.zeros.assign(size_t(nrows * ng), 8.0f);
  if (nrows == 0 || ncols == 0) return s;
  const bool ct = q.packing == Int4Packing::PackQuantized;
  // Every value through one accessor: (row r, column c) of the slice -> the 4-bit code.
  std::vector<int32_t> vw;
  int64_t vw_cols = 0;
  const int64_t w0 = row0 / 8, nw = (row0 + nrows - 1) / 8 - w0 + 1;  // output-column words (awq, zeros)
  if (q.packing == Int4Packing::Awq) {
    expect_tensor(w, q, pn.values, "packed values", name, true, {K, N / 8});
    vw = words(w, pn.values, col0, ncols, w0, nw), vw_cols = nw;
  } else if (q.packing == Int4Packing::Gptq) {
    expect_tensor(w, q, pn.values, "packed values", name, true, {K / 8, N});
    const int64_t k0 = col0 / 8, nk = (col0 + ncols - 1) / 8 - k0 + 1;
    vw = words(w, pn.values, k0, nk, row0, nrows), vw_cols = nrows;
  } else {
    expect_tensor(w, q, pn.values, "packed values", name, true, {N, ceil_div(K, 8)});
    const int64_t k0 = col0 / 8, nk = (col0 + ncols - 1) / 8 - k0 + 1;
    vw = words(w, pn.values, row0, nrows, k0, nk), vw_cols = nk;
  }
  auto code = [&](int64_t r, int64_t c) -> uint8_t {
    const int64_t n = row0 + r, k = col0 + c;
    uint32_t word = 0;
    int nib = 0;
    if (q.packing == Int4Packing::Awq) {
      word = uint32_t(vw[size_t(c * vw_cols + (n / 8 - w0))]), nib = kAwqNibble[n % 8];
    } else if (q.packing == Int4Packing::Gptq) {
      word = uint32_t(vw[size_t((k / 8 - col0 / 8) * vw_cols + r)]), nib = int(k % 8);
    } else {
      word = uint32_t(vw[size_t(r * vw_cols + (k / 8 - col0 / 8))]), nib = int(k % 8);
    }
    return uint8_t((word >> (4 * nib)) & 0xfu);
  };
  for (int64_t r = 0; r < nrows; ++r)
    for (int64_t c = 0; c < ncols; ++c) s.values[size_t(r * rb + c / 2)] |= uint8_t(code(r, c) << (4 * (c & 1)));

  // Scales: [G, N] (awq, gptq) or [N, G] (compressed-tensors), read as fp32.
  std::vector<float> sc(size_t(nrows * ng));
  if (ct) {
    expect_tensor(w, q, pn.scales, "scales", name, false, {N, G});
    w.read(pn.scales, row0, nrows, g0, ng, DType::F32, sc.data());
  } else {
    expect_tensor(w, q, pn.scales, "scales", name, false, {G, N});
    std::vector<float> t(size_t(ng * nrows));
    w.read(pn.scales, g0, ng, row0, nrows, DType::F32, t.data());
    for (int64_t r = 0; r < nrows; ++r)
      for (int64_t j = 0; j < ng; ++j) sc[size_t(r * ng + j)] = t[size_t(j * nrows + r)];
  }
  s.scales = std::move(sc);
  if (ct) return s;  // symmetric: zero 8 in the unsigned packing

  expect_tensor(w, q, pn.zeros, "zero points", name, true, {G, ceil_div(N, 8)});
  const std::vector<int32_t> zw = words(w, pn.zeros, g0, ng, w0, nw);
  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t n = row0 + r;
    const int nib = q.packing == Int4Packing::Awq ? kAwqNibble[n % 8] : int(n % 8);
    for (int64_t j = 0; j < ng; ++j) {
      const uint32_t z = (uint32_t(zw[size_t(j * nw + (n / 8 - w0))]) >> (4 * nib)) & 0xfu;
      s.zeros[size_t(r * ng + j)] = float(z) + (q.zeros_minus_one ? 1.0f : 0.0f);
    }
  }
  if (q.packing == Int4Packing::Gptq) check_g_idx(w, q, pn.g_idx, name, K, g);
  return s;
}

}  // namespace tpbatch
