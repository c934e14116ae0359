#pragma once
// The dtypes a run keeps, from the job's choices, the checkpoint and the device: the one rule that
// `run` applies and `plan` predicts with.
#include <functional>
#include <optional>

#include "backend/dtype.h"
#include "job/job_spec.h"

namespace tpbatch {

struct RunDtypes {
  DType weights;      // linear layers and embeddings (norms and biases are always float32)
  DType kv_cache;
  DType activations;  // between layers, as the backend computes (accumulating in float32)
};

// weights: the job's dtype; auto keeps the checkpoint's storage dtype (`checkpoint_dtype`, asked
// only then). KV cache: engine.kv_cache_dtype; auto is float32 on the CPU, bfloat16 on CUDA.
// Activations: bfloat16 on CUDA, float32 on the CPU.
RunDtypes run_dtypes(const JobSpec& job, const std::function<DType()>& checkpoint_dtype, bool on_cuda);

// The dtype a job's choice names (dtype, engine.kv_cache_dtype); none for auto.
std::optional<DType> dtype_of(DTypeChoice choice);

}  // namespace tpbatch
