#pragma once
// The speed part of `tpbatch plan`: the machine the cost model (plan/cost_model.h) runs on — each
// figure given as a flag, else measured (--calibrate), else the --preset's, else the default — and
// the prediction for every layout of the plan, as text and as JSON. Every plan predicts (the
// throughput recommendation is the fastest prediction, plan/layout_recommendation.h); the table
// is printed with --preset, --calibrate, --memory-gbs or --gemm-tflops.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "model/config.h"
#include "plan/cost_model.h"
#include "plan/hardware_presets.h"
#include "plan/machine_calibration.h"
#include "plan/memory_ledger.h"

namespace tpbatch {

// Defaults when neither given, measured nor preset. Accelerator: the rates of the preset
// kDefaultAcceleratorPreset (plan/hardware_presets.h). CPU: the 2-core development machine's
// OpenBLAS sgemv stream (19 GB/s) and a modest GEMM rate.
inline constexpr double kCpuMemoryGBs = 19.0;
inline constexpr double kCpuGemmTflops = 0.15;

struct SpeedRequest {
  bool calibrate = false;
  double memory_gbs = -1.0;       // < 0: measured (--calibrate) or the default
  double gemm_tflops = -1.0;
  const HardwarePreset* preset = nullptr;  // --preset of an accelerator: memory and GEMM figures
  double gemm_half_rows = -1.0;   // < 0: measured or 0
  std::vector<GemmRate> gemm_rates;        // --gemm-rates M:TFLOPS,...; empty: measured or none
  double attention_tflops = -1.0;          // < 0: measured or 0 (KV bytes / bandwidth only)
  double prefill_attention_tflops = -1.0;  // < 0: measured or 0 (at the GEMM rate)
  double layer_overhead_us = -1.0;         // < 0: measured or 0 (none)
  double logits_overhead_us = -1.0;        // < 0: measured or 0 (none)
  double oversubscription = -1.0;          // < 0: measured (CPU, the job on one node) or 1
  bool alpha_measured = false;             // the plan's alpha is the calibration's: per layout its TP size's
  int64_t prompt_tokens = 0;      // 0: row_tokens - max_new_tokens
  int64_t new_tokens = 0;         // 0: the job's sampling.max_new_tokens
  int64_t rows = 0;               // per replica; 0: min(max_seqs, the layout's concurrent rows)
};

struct LayoutSpeed {
  bool predicted = false;         // false when the layout does not fit
  double alpha_us = 0.0;          // the allreduce alpha of its prediction
  RowShape shape;
  SpeedPrediction p;
};

struct SpeedReport {
  MachineModel node;              // node totals on the CPU (memory, GEMM), per device on accelerators
  MachineModel rank;              // what one rank gets: CPU memory and GEMM shared by the node's ranks
  int ranks_sharing = 1;
  std::string memory_source, gemm_source, allreduce_source;  // "measured" | "given" | "preset NAME" | "default"
  std::string gemm_rates_source, attention_source, overhead_source;  // also "none"
  std::optional<Calibration> calibration;
  std::vector<LayoutSpeed> layouts;  // parallel to Plan::layouts
};

// Whether the speed table is printed (a preset, measured or given figures).
bool wants_speed(const SpeedRequest& r);

// "1:0.005,8:0.03,32:0.05" (rows:TFLOP/s, node totals on the CPU) as ascending points; throws
// JobError naming --gemm-rates and the bad item.
std::vector<GemmRate> parse_gemm_rates(const std::string& text);

// The plan's alpha/bandwidth (already resolved from flags, the calibration or defaults) are the
// allreduce model; `allreduce_source` says which.
SpeedReport make_speed_report(const SpeedRequest& r, const std::optional<Calibration>& calibration,
                              const std::string& allreduce_source, const Plan& plan, const ModelConfig& config,
                              int64_t max_new_tokens);

void add_speed_json(nlohmann::json& plan_json, const SpeedReport& report);
void print_speed_text(const SpeedReport& report, const Plan& plan, std::ostream& out);

}  // namespace tpbatch
