#include "plan/hardware_presets.h"

#include <cstdio>

#include "common/error.h"

namespace tpbatch {

double HardwarePreset::memory_gbs() const { return memory_tbs * 1e3 * kMemoryBandwidthFraction; }
double HardwarePreset::gemm_tflops() const { return bf16_dense_tflops * kGemmFraction; }
double HardwarePreset::allreduce_gbs() const { return nvlink_gbs / 2.0 * kNvlinkAllreduceFraction; }
double HardwarePreset::internode_gbs() const { return internode_gbits / 8.0 * kInternodeFraction; }
double HardwarePreset::device_memory_gib() const { return memory_gb * 1e9 / (1024.0 * 1024.0 * 1024.0); }

const std::vector<HardwarePreset>& hardware_presets() {
  // Datasheets: NVIDIA H100 Tensor Core GPU (SXM5 80GB), NVIDIA H200 Tensor Core GPU (SXM 141GB),
  // NVIDIA A100 Tensor Core GPU (SXM4 80GB; 2,039 GB/s); network: one ConnectX-7 NDR 400 Gb/s (H100,
  // H200) or ConnectX-6 HDR 200 Gb/s (A100) adapter per GPU, as in DGX H100/H200 and DGX A100.
  // Fields: name, description, measure_this_machine, GB, TB/s, bf16 dense TFLOP/s, NVLink GB/s,
  // network Gb/s a GPU, GPUs a node, NVLink allreduce alpha us, inter-node alpha us.
  static const std::vector<HardwarePreset> presets = {
      {"h100", "NVIDIA H100 SXM 80GB, 8 per node, NDR InfiniBand", false, 80, 3.35, 989, 900, 400, 8, 8, 10},
      {"h200", "NVIDIA H200 SXM 141GB, 8 per node, NDR InfiniBand", false, 141, 4.8, 989, 900, 400, 8, 8, 10},
      {"a100", "NVIDIA A100 SXM 80GB, 8 per node, HDR InfiniBand", false, 80, 2.039, 312, 600, 200, 8, 8, 10},
      {"cpu", "this machine: the CPU backend, measured (--calibrate)", true, 0, 0, 0, 0, 0, 0, 0, 0},
  };
  return presets;
}

std::string hardware_preset_names(const std::string& separator) {
  std::string s;
  for (const HardwarePreset& p : hardware_presets()) s += (s.empty() ? "" : separator) + p.name;
  return s;
}

const HardwarePreset& default_accelerator_preset() { return hardware_preset(kDefaultAcceleratorPreset); }

std::string hardware_presets_help() {
  std::string s;
  char line[512];
  for (const HardwarePreset& p : hardware_presets()) {
    if (p.measure_this_machine)
      std::snprintf(line, sizeof line, "\n  %-5s %s", p.name.c_str(), p.description.c_str());
    else
      std::snprintf(line, sizeof line,
                    "\n  %-5s %s: %g GB, HBM %g TB/s, %g TFLOP/s bf16 dense, NVLink %g GB/s, network %g Gb/s a GPU"
                    " (uses %.0f GB/s, %.0f TFLOP/s, allreduce %.0f GB/s alpha %g us, between nodes %.0f GB/s alpha %g us)",
                    p.name.c_str(), p.description.c_str(), p.memory_gb, p.memory_tbs, p.bf16_dense_tflops,
                    p.nvlink_gbs, p.internode_gbits, p.memory_gbs(), p.gemm_tflops(), p.allreduce_gbs(),
                    p.nvlink_alpha_us, p.internode_gbs(), p.internode_alpha_us);
    s += line;
  }
  return s;
}

const HardwarePreset& hardware_preset(const std::string& name) {
  for (const HardwarePreset& p : hardware_presets())
    if (p.name == name) return p;
  throw JobError("--preset: unknown preset '" + name + "' (valid: " + hardware_preset_names(", ") + ")");
}

}  // namespace tpbatch
