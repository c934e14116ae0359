#pragma once
// Gathers blocks of checkpoint tensors into one host staging area, then uploads it to a backend
// buffer in one copy: how a rank's slices, and fused tensors (q|k|v, gate|up), are built.
// Dense tensors are converted to the staging's dtype. A quantized (F8_E4M3 or I8) tensor is copied as
// is, with its scales (the checkpoint's `<name>_scale(_inv)`, model/quantization.h) expanded to one
// row of group scales per output row, so that any slice of rows or columns stays exact; a 4-bit
// (I4) one is unpacked to two values a byte with a row of scales and of zero points per output row
// (model/int4_checkpoint.h). Only upload_linear takes those.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/linear_weight.h"
#include "model/quantization.h"
#include "model/safetensors.h"

namespace tpbatch {

class WeightStaging {
 public:
  WeightStaging(const WeightStore& w, DType dtype, const QuantizationConfig& quant) : w_(w), dtype_(dtype), quant_(quant) {}

  // Rows [row0, row0+nrows) x columns [col0, col0+ncols) of a tensor, appended.
  WeightStaging& rows(const std::string& name, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols);
  WeightStaging& all(const std::string& name, int64_t cols) { return rows(name, 0, 1, 0, cols); }
  // Adds `x` to every staged element (F32 staging only): Gemma's (1 + weight) norms.
  WeightStaging& plus(float x);

  Buffer upload(Backend& be);               // dense tensors only
  LinearWeight upload_linear(Backend& be);  // dense or quantized, all blocks alike

 private:
  struct Grid {
    int64_t groups = 1, group = 1, phase = 0;
    bool operator==(const Grid&) const = default;
  };
  void stage_quantized(const TensorInfo& t, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols);
  void stage_int4(const TensorInfo& t, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols);
  void join_quantized(const TensorInfo& t, DType values, const Grid& g);
  void clear();

  const WeightStore& w_;
  DType dtype_;
  const QuantizationConfig& quant_;
  std::vector<char> bytes_;
  std::vector<float> scales_;       // [staged rows][grid.groups] when quantized
  std::vector<float> zeros_;        // the same for 4-bit values' zero points
  std::string first_name_;          // the first staged tensor, for messages
  bool quantized_ = false;
  DType values_ = DType::F8E4M3;    // the quantized values' type: F8E4M3, I8 or I4
  Grid grid_;
};

}  // namespace tpbatch
