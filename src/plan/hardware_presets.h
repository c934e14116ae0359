#pragma once
// `tpbatch plan --preset NAME`: the hardware figures of a known accelerator node, so a user need not
// type bandwidths. Each figure is the public datasheet's, times the fraction of it a run reaches
// (the cost model, plan/cost_model.h, takes the product); explicit flags override any field.
// `cpu` has no figures: it plans for this machine and measures it (`--calibrate`).
#include <cstdint>
#include <string>
#include <vector>

namespace tpbatch {

struct HardwarePreset {
  std::string name;               // as --preset takes it
  std::string description;        // the part and its datasheet
  bool measure_this_machine = false;  // cpu: no figures, `--calibrate` measures them
  // Datasheet figures (0 for cpu).
  double memory_gb = 0.0;          // HBM per GPU, GB (1e9 B)
  double memory_tbs = 0.0;         // HBM bandwidth, TB/s
  double bf16_dense_tflops = 0.0;  // dense bf16 tensor-core peak, TFLOP/s
  double nvlink_gbs = 0.0;         // NVLink per GPU, GB/s, both directions together
  double internode_gbits = 0.0;    // network per GPU (InfiniBand), Gb/s
  int gpus_per_node = 0;
  // Latencies a collective meets (NCCL small-message figures, not datasheet values), microseconds.
  double nvlink_alpha_us = 0.0;
  double internode_alpha_us = 0.0;

  // What the cost model uses: datasheet x the achievable fractions below.
  double memory_gbs() const;         // HBM read bandwidth, GB/s
  double gemm_tflops() const;        // GEMM rate, TFLOP/s
  double allreduce_gbs() const;      // intra-node allreduce bus bandwidth, GB/s
  double internode_gbs() const;      // inter-node hand-off bandwidth, GB/s
  double device_memory_gib() const;  // memory_gb in GiB, as --device-memory takes it
};

// The fractions of the datasheet a run reaches.
inline constexpr double kMemoryBandwidthFraction = 0.90;  // STREAM-like reads reach ~90% of HBM peak
inline constexpr double kGemmFraction = 0.70;             // large bf16 cuBLAS GEMMs reach ~70% of dense peak
// Ring allreduce bus bandwidth: 80% of one direction of NVLink (half the bidirectional figure), as
// nccl-tests reports on 8-GPU nodes.
inline constexpr double kNvlinkAllreduceFraction = 0.80;
inline constexpr double kInternodeFraction = 0.80;        // of the NIC's line rate

// The rates an accelerator plan uses without --preset (its memory size still comes from
// --device-memory, its ranks per node from the flag or the job).
inline constexpr const char* kDefaultAcceleratorPreset = "h200";
const HardwarePreset& default_accelerator_preset();

// The presets, in the order `plan --help` lists them.
const std::vector<HardwarePreset>& hardware_presets();
// "h100 | h200 | a100 | cpu"
std::string hardware_preset_names(const std::string& separator = " | ");
// One line a preset, its datasheet figures and what the cost model takes, for `plan --help`.
std::string hardware_presets_help();
// The preset of that name; throws JobError (exit 2) naming it and listing the valid ones.
const HardwarePreset& hardware_preset(const std::string& name);

}  // namespace tpbatch
