#include "model/weight_staging.h"

#include <cstring>

#include "common/error.h"
#include "model/int4_checkpoint.h"

namespace tpbatch {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

WeightStaging& WeightStaging::rows(const std::string& name, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) {
  const TensorInfo& t = w_.tensor(name);
  if (first_name_.empty()) first_name_ = name;
  if (t.dtype == DType::F8E4M3 || t.dtype == DType::I8) {
    stage_quantized(t, row0, nrows, col0, ncols);
    return *this;
  }
  if (t.dtype == DType::I4) {
    stage_int4(t, row0, nrows, col0, ncols);
    return *this;
  }
  if (quantized_)
    throw Error(t.file + ": tensor '" + name + "' is " + dtype_name(t.dtype) + " but '" + first_name_ +
                "', fused with it, is quantized: fused tensors must be quantized alike");
  const size_t at = bytes_.size();
  bytes_.resize(at + static_cast<size_t>(nrows * ncols) * dtype_size(dtype_));
  w_.read(name, row0, nrows, col0, ncols, dtype_, bytes_.data() + at);
  return *this;
}

void WeightStaging::stage_quantized(const TensorInfo& t, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) {
  const std::string& name = t.name;
  const std::string dtype = dtype_name(t.dtype);
  if (!quant_.quantized())
    throw Error(t.file + ": tensor '" + name + "' is " + dtype + " but config.json has no quantization_config");
  if (t.dtype != quant_.value_dtype())
    throw Error(t.file + ": tensor '" + name + "' is " + dtype + " but config.json's quantization_config says " +
                quant_.describe());
  if (t.shape.size() != 2)
    throw Error(t.file + ": tensor '" + name + "' is " + dtype + " with shape " + shape_text(t.shape) +
                ": only 2-D linear weights may be quantized");
  if (!bytes_.empty() && !quantized_)
    throw Error(t.file + ": tensor '" + name + "' is quantized but '" + first_name_ +
                "', fused with it, is not: fused tensors must be quantized alike");
  const int64_t N = t.shape[0], K = t.shape[1];
  const std::string sname = quant_.scale_tensor_name(name);
  if (!w_.has(sname))
    throw Error("tensor '" + sname + "' is missing: the scales of quantized tensor '" + name + "' (" +
                quant_.describe() + ")");
  const TensorInfo& st = w_.tensor(sname);
  if (!quant_.scale_shape_matches(st.shape, N, K))
    throw Error(st.file + ": tensor '" + sname + "': shape " + shape_text(st.shape) + " but the scales of '" + name +
                "' " + shape_text(t.shape) + " are " + shape_text(quant_.scale_shape(N, K)) + " (" + quant_.describe() +
                ")");
  Grid g;
  std::vector<float> src;  // the scale values this slice needs
  int64_t src_cols = 1;
  g.group = quant_.scale_group_width(K);
  g.phase = quant_.scale_phase(col0, K);
  g.groups = quant_.scale_groups(col0, ncols, K);
  if (quant_.granularity == ScaleGranularity::Block) {
    const int64_t bn = quant_.block_rows, bk = quant_.block_cols;
    const int64_t br0 = row0 / bn, nbr = nrows > 0 ? (row0 + nrows - 1) / bn - br0 + 1 : 0;
    src.resize(size_t(nbr * g.groups));
    src_cols = g.groups;
    w_.read(sname, br0, nbr, col0 / bk, g.groups, DType::F32, src.data());
  } else {  // one group: the whole row, wherever the slice starts
    if (quant_.granularity == ScaleGranularity::Channel) {
      src.resize(size_t(nrows));
      if (st.shape.size() == 2)
        w_.read(sname, row0, nrows, 0, 1, DType::F32, src.data());
      else
        w_.read(sname, 0, 1, row0, nrows, DType::F32, src.data());
    } else {
      src.resize(1);
      w_.read(sname, 0, 1, 0, 1, DType::F32, src.data());
    }
  }
  join_quantized(t, t.dtype, g);
  const size_t at = bytes_.size();
  bytes_.resize(at + size_t(nrows * ncols));
  w_.read(name, row0, nrows, col0, ncols, t.dtype, bytes_.data() + at);
  for (int64_t r = 0; r < nrows; ++r)
    for (int64_t j = 0; j < g.groups; ++j) {
      float s = src[0];
      if (quant_.granularity == ScaleGranularity::Block)
        s = src[size_t(((row0 + r) / quant_.block_rows - row0 / quant_.block_rows) * src_cols + j)];
      else if (quant_.granularity == ScaleGranularity::Channel)
        s = src[size_t(r)];
      scales_.push_back(s);
    }
}

// Fused tensors (q|k|v, gate|up) must share the value type and the scale grid.
void WeightStaging::join_quantized(const TensorInfo& t, DType values, const Grid& g) {
  if (quantized_ && (!(g == grid_) || values != values_))
    throw Error(t.file + ": tensor '" + t.name + "' and '" + first_name_ +
                "' are fused but their quantization or scale groups differ (different formats, input widths or "
                "column slices)");
  quantized_ = true;
  values_ = values;
  grid_ = g;
}

void WeightStaging::stage_int4(const TensorInfo& t, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) {
  if (!bytes_.empty() && !quantized_)
    throw Error(t.file + ": tensor '" + t.name + "' is quantized but '" + first_name_ +
                "', fused with it, is not: fused tensors must be quantized alike");
  Int4Slice s = read_int4_slice(w_, quant_, t, row0, nrows, col0, ncols);
  join_quantized(t, DType::I4, Grid{s.groups, s.group, s.phase});
  bytes_.insert(bytes_.end(), s.values.begin(), s.values.end());
  scales_.insert(scales_.end(), s.scales.begin(), s.scales.end());
  zeros_.insert(zeros_.end(), s.zeros.begin(), s.zeros.end());
}

WeightStaging& WeightStaging::plus(float x) {
  if (dtype_ != DType::F32 || quantized_) throw Error("internal error: WeightStaging::plus on a non-F32 staging");
  for (size_t i = 0; i + 4 <= bytes_.size(); i += 4) {
    float f;
    std::memcpy(&f, bytes_.data() + i, 4);
    f += x;
    std::memcpy(bytes_.data() + i, &f, 4);
  }
  return *this;
}

Buffer WeightStaging::upload(Backend& be) {
  if (quantized_)
    throw Error("tensor '" + first_name_ + "' is quantized (" + dtype_name(values_) +
                "): only linear layers' weights may be");
  Buffer b = be.alloc(bytes_.size() / dtype_size(dtype_), dtype_);
  if (!bytes_.empty()) be.upload(b.view(), bytes_.data(), bytes_.size());
  clear();
  return b;
}

LinearWeight WeightStaging::upload_linear(Backend& be) {
  LinearWeight lw;
  if (!quantized_) {
    lw.values = upload(be);
    return lw;
  }
  if (!be.runs_quantized_weights(values_))
    throw Error("tensor '" + first_name_ + "' is quantized (" + quant_.describe() + "): the " + be.name() +
                " backend does not run " + dtype_name(values_) + " weights (the CPU backend runs every format)");
  lw.values = be.alloc(bytes_.size(), values_);
  if (!bytes_.empty()) be.upload(lw.values.view(), bytes_.data(), bytes_.size());
  lw.scales = be.alloc(scales_.size(), DType::F32);
  if (!scales_.empty()) be.upload(lw.scales.view(), scales_.data(), scales_.size() * 4);
  if (values_ == DType::I4) {
    lw.zeros = be.alloc(zeros_.size(), DType::F32);
    if (!zeros_.empty()) be.upload(lw.zeros.view(), zeros_.data(), zeros_.size() * 4);
  }
  lw.groups = grid_.groups;
  lw.group = grid_.group;
  lw.phase = grid_.phase;
  clear();
  return lw;
}

void WeightStaging::clear() {
  bytes_.clear();
  scales_.clear();
  zeros_.clear();
  first_name_.clear();
  quantized_ = false;
  grid_ = Grid{};
}

}  // namespace tpbatch
