#include "model/run_dtypes.h"

namespace tpbatch {

std::optional<DType> dtype_of(DTypeChoice choice) {
  switch (choice) {
    case DTypeChoice::kFloat32: return DType::F32;
    case DTypeChoice::kBFloat16: return DType::BF16;
    case DTypeChoice::kFloat16: return DType::F16;
    case DTypeChoice::kAuto: break;
  }
  return std::nullopt;
}

RunDtypes run_dtypes(const JobSpec& job, const std::function<DType()>& checkpoint_dtype, bool on_cuda) {
  const DType device_default = on_cuda ? DType::BF16 : DType::F32;
  RunDtypes d{};
  d.weights = dtype_of(job.dtype) ? *dtype_of(job.dtype) : checkpoint_dtype();
  d.kv_cache = dtype_of(job.engine.kv_cache_dtype).value_or(device_default);
  d.activations = device_default;
  return d;
}

}  // namespace tpbatch
