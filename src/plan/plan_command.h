#pragma once
// `tpbatch plan JOB.yaml [--preset h100|h200|a100|cpu] [--world-size N] [--ranks-per-node N]
// [--device-memory GiB] [--device cpu|cuda] [--json]`: reads the job and the model's config.json
// (no weights, no MPI) and prints the memory ledger of every legal layout (plan/memory_ledger.h),
// the predicted speed of each (plan/speed_report.h) and the recommended layouts
// (plan/layout_recommendation.h), as a table or as one JSON object. Each hardware figure is the
// flag's when given, else measured (--calibrate), else the preset's (plan/hardware_presets.h),
// else the default.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "model/config.h"
#include "plan/memory_ledger.h"
#include "plan/speed_report.h"

namespace tpbatch {

struct PlanOptions {
  std::string job_path;
  std::string preset;              // --preset; empty: none
  std::vector<std::string> sets;   // --set KEY=VALUE overrides of the job
  int world_size = 0;              // 0: the job's parallel.tensor x parallel.pipeline
  int ranks_per_node = 0;          // 0: the job's parallel.ranks_per_node, else the world size
  double device_memory_gib = 0.0;  // 0: CPU backend, MemAvailable / ranks on this node
  std::string device;              // "cpu" | "cuda"; empty: the job's device:, and for auto cuda
                                   // when device_memory_gib is given, else cpu
  int64_t row_tokens = 0;          // 0: min(max_position_embeddings, 1024 + sampling.max_new_tokens)
  double alpha_us = -1.0;          // < 0: default (NVLink with --device-memory, else measured CPU)
  double bandwidth_gbs = -1.0;     // < 0: default, as alpha
  double internode_alpha_us = -1.0;  // < 0: the preset's, else as alpha_us
  double internode_gbs = -1.0;       // < 0: the preset's, else as bandwidth_gbs
  bool json = false;
  SpeedRequest speed;              // --calibrate, --memory-gbs, --gemm-tflops, ...: plan/speed_report.h
};

// Runs the command; throws Error (exit 2 for bad options or job, 1 for config errors).
int run_plan(const PlanOptions& options, std::ostream& out);

// The JSON object `--json` prints (also used by the tests).
std::string plan_json(const Plan& plan, const ModelConfig& config, const std::string& model, const std::string& dtype);
// The readable report.
void print_plan_text(const Plan& plan, const ModelConfig& config, const std::string& model, const std::string& dtype,
                     std::ostream& out);

}  // namespace tpbatch
