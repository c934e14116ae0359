#include "plan/plan_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/error.h"
#include "common/mem_available.h"
#include "job/job_spec.h"
#include "model/llama_shard.h"
#include "model/run_dtypes.h"
#include "model/safetensors.h"
#include "model/shard_placement.h"
#include "plan/hardware_presets.h"
#include "plan/layout_recommendation.h"

namespace tpbatch {
namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// MemAvailable, or 8 GiB where /proc/meminfo has none (not Linux): a plan still comes out.
int64_t host_memory_for_plan() {
  const int64_t available = mem_available_bytes();
  return available > 0 ? available : int64_t{8} << 30;
}

// The device the run would use: --device, else the preset's, else the job's device:, and for `auto`
// cuda when a device memory size was given (planning for accelerators), else cpu.
std::string plan_device(const PlanOptions& o, const JobSpec& job, const HardwarePreset* preset) {
  if (!o.device.empty()) {
    if (o.device != "cpu" && o.device != "cuda") throw JobError("--device must be cpu or cuda, not '" + o.device + "'");
    if (preset && (o.device == "cpu") != preset->measure_this_machine)
      throw JobError("--device " + o.device + " contradicts --preset " + preset->name + " (" + preset->description + ")");
    return o.device;
  }
  if (preset) return preset->measure_this_machine ? "cpu" : "cuda";
  if (job.device == Device::kCpu) return "cpu";
  if (job.device == Device::kCuda) return "cuda";
  return o.device_memory_gib > 0 ? "cuda" : "cpu";
}

// Whether the shard model.safetensors.index.json names for the embedding is in the folder. A
// folder of config.json and the index alone (the shards not downloaded) is planned from the config,
// as one without weights is; an index we cannot read counts as present, so the run's loader names
// what is wrong with it.
bool indexed_embedding_present(const std::filesystem::path& dir) {
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (!std::filesystem::exists(index, ec)) return false;
  const json j = json::parse(std::ifstream(index), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object()) return true;
  const json& wm = j.at("weight_map");
  auto it = wm.find("model.embed_tokens.weight");
  if (it == wm.end() || !it->is_string()) return true;
  return std::filesystem::exists(dir / it->get<std::string>(), ec);
}

// The checkpoint's storage dtype as run_job reads it (from the embedding) when the weights are
// there, else config.json's torch_dtype.
DType checkpoint_dtype(const JobSpec& job, const ModelConfig& cfg) {
  const std::filesystem::path dir(job.model);
  if (std::filesystem::exists(dir / "model.safetensors") || indexed_embedding_present(dir))
    return WeightStore::open(dir).tensor("model.embed_tokens.weight").dtype;
  return dtype_of_name(cfg.torch_dtype, "config.json torch_dtype");
}

// The dtypes the run keeps on `device` ("cpu" | "cuda").
RunDtypes plan_dtypes(const JobSpec& job, const ModelConfig& cfg, const std::string& device) {
  return run_dtypes(job, [&] { return checkpoint_dtype(job, cfg); }, device == "cuda");
}

// Job-level dtype names as the JSON and the text print them.
const char* dtype_word(DType d) {
  switch (d) {
    case DType::F32: return "float32";
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    default: return "int32";
  }
}

json layout_json(const LayoutLedger& g) {
  return json{{"tensor", g.tensor},
              {"pipeline", g.pipeline},
              {"data", g.data},
              {"layers_per_stage", g.layers_per_stage},
              {"weights_bytes_per_rank", g.weights_bytes_per_rank},
              {"kv_bytes_per_token_per_rank", g.kv_bytes_per_token_per_rank},
              {"reserved_bytes_per_rank", g.reserved_bytes_per_rank},
              {"kv_budget_bytes_per_rank", g.kv_budget_bytes_per_rank},
              {"kv_tokens_per_rank", g.kv_tokens_per_rank},
              {"concurrent_rows", g.concurrent_rows},
              {"fits", g.fits},
              {"allreduce_us_per_decode_step", g.allreduce_us_per_decode_step},
              {"expert_weights_bytes_per_rank", g.expert_weights_bytes_per_rank},
              {"moe_scratch_bytes_per_rank", g.moe_scratch_bytes_per_rank}};
}

json expert_split_json(const ExpertSplitOption& o) {
  if (!o.legal) return json{{"legal", false}};
  json j = layout_json(o.ledger);
  j["legal"] = true;
  return j;
}

const char* split_word(ExpertSplit s) { return s == ExpertSplit::kExpert ? "expert" : "tensor"; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Mixture of experts: each layout under parallel.experts tensor and expert, so the user sees which fits.
void print_expert_splits(const ModelConfig& config, const PlanInputs& in, std::ostream& out) {
  out << "\nmixture of experts by parallel.experts (this job: " << split_word(in.experts)
      << "): expert weights (routers + the experts a rank holds) and the MoE block's scratch at max_batch_tokens,\n"
      << "per rank; the same one allreduce per MoE layer either way; under expert a rank's work per step follows the\n"
      << "routing (the rank with the most popular experts sets the pace)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%4s %4s  %-7s %14s %14s %14s %14s %5s\n", "TP", "PP", "split", "experts GiB",
                "scratch MiB", "weights GiB", "KV tokens", "fits");
  out << line;
  for (const auto& c : compare_expert_splits(config, in))
    for (const ExpertSplitOption* o : {&c.tensor_split, &c.expert_split}) {
      const char* name = o == &c.tensor_split ? "tensor" : "expert";
      if (!o->legal) {
        std::snprintf(line, sizeof line, "%4d %4d  %-7s %s\n", c.tensor, c.pipeline, name,
                      ("n/a: " + std::to_string(config.num_experts) + " experts not divisible by TP").c_str());
      } else {
        const LayoutLedger& g = o->ledger;
        std::snprintf(line, sizeof line, "%4d %4d  %-7s %14.3f %14.1f %14.2f %14lld %5s\n", c.tensor, c.pipeline, name,
                      static_cast<double>(g.expert_weights_bytes_per_rank) / kGiB,
                      static_cast<double>(g.moe_scratch_bytes_per_rank) / (1024.0 * 1024.0),
                      static_cast<double>(g.weights_bytes_per_rank) / kGiB, static_cast<long long>(g.kv_tokens_per_rank),
                      g.fits ? "yes" : "no");
      }
      out << line;
    }
}

std::string layout_name(const LayoutLedger& g) {
  return "tensor " + std::to_string(g.tensor) + " x pipeline " + std::to_string(g.pipeline) + " x data " +
         std::to_string(g.data);
}

}  // namespace

std::string plan_json(const Plan& plan, const ModelConfig& config, const std::string& model, const std::string& dtype) {
  const PlanInputs& in = plan.inputs;
  json j;
  j["model"] = model;
  j["architecture"] = config.architecture;
  j["dtype"] = dtype;
  j["device"] = in.accelerator ? "cuda" : "cpu";
  j["weight_dtype"] = dtype_word(in.weight_dtype);
  j["kv_cache_dtype"] = dtype_word(in.kv_dtype);
  j["activation_dtype"] = dtype_word(in.activation_dtype);
  j["bytes_per_element"] = dtype_size(in.weight_dtype);  // of the weights (norms and biases are float32)
  j["world_size"] = in.world_size;
  j["ranks_per_node"] = in.ranks_per_node;
  j["device_memory_bytes"] = in.device_memory_bytes;
  j["accelerator"] = in.accelerator;
  j["memory_utilization"] = in.memory_utilization;
  j["max_batch_tokens"] = in.max_batch_tokens;
  j["max_seqs"] = in.max_seqs;
  j["row_tokens"] = in.row_tokens;
  j["alpha_us"] = in.alpha_us;
  j["bandwidth_gbs"] = in.bandwidth_gbs;
  j["internode_alpha_us"] = in.internode_alpha_us;
  j["internode_gbs"] = in.internode_gbs;
  j["preset"] = in.preset.empty() ? json() : json(in.preset);
  json layouts = json::array();
  for (const auto& g : plan.layouts) layouts.push_back(layout_json(g));
  j["layouts"] = layouts;
  j["parallel_experts"] = split_word(in.experts);
  if (config.num_experts > 0) {  // mixture of experts: every layout under both parallel.experts choices
    json splits = json::array();
    for (const auto& c : compare_expert_splits(config, in))
      splits.push_back(json{{"tensor", c.tensor},
                            {"pipeline", c.pipeline},
                            {"tensor_split", expert_split_json(c.tensor_split)},
                            {"expert_split", expert_split_json(c.expert_split)}});
    j["expert_splits"] = splits;
  }
  json throughput = plan.throughput ? layout_json(plan.layouts[*plan.throughput]) : json();
  if (plan.throughput) throughput["predicted_tokens_per_s_total"] = plan.throughput_tokens_per_s;
  j["recommended"] = json{{"throughput", throughput},
                          {"latency", plan.latency ? layout_json(plan.layouts[*plan.latency]) : json()}};
  return j.dump(2);
}

void print_plan_text(const Plan& plan, const ModelConfig& config, const std::string& model, const std::string& dtype,
                     std::ostream& out) {
  const PlanInputs& in = plan.inputs;
  out << "model: " << model << " (" << config.architecture << ", " << config.num_layers << " layers, hidden "
      << config.hidden_size << ", " << config.num_heads << " heads, " << config.num_kv_heads << " KV heads, vocab "
      << config.vocab_size << ")\n";
  if (config.num_experts > 0) {  // the weights column counts the router and every expert's slice
    int64_t sparse = 0;
    for (int64_t l = 0; l < config.num_layers; ++l) sparse += config.is_moe_layer(l);
    out << "mixture of experts: " << config.num_experts << " experts of width " << config.expert_intermediate_size
        << ", top-" << config.experts_per_token << ", on " << sparse << " of " << config.num_layers
        << " layers; "
        << (in.experts == ExpertSplit::kExpert
                ? "parallel.experts: expert, whole experts on each tensor-parallel rank (num_experts / TP of them)\n"
                : "parallel.experts: tensor, each expert split across the tensor-parallel ranks like the dense MLP\n");
  }
  out << "device: " << (in.accelerator ? "cuda" : "cpu") << "; weights " << dtype << " (" << dtype_size(in.weight_dtype)
      << " bytes per element; norms and biases float32), KV cache " << dtype_word(in.kv_dtype)
      << ", activations " << dtype_word(in.activation_dtype) << " (compute accumulates in float32)\n";
  out << "world size " << in.world_size << ", " << in.ranks_per_node << " ranks per node, device memory "
      << fmt("%.2f", static_cast<double>(in.device_memory_bytes) / kGiB) << " GiB per rank"
      << (in.accelerator ? " (accelerator: 1 GiB context reserved)" : " (CPU: --device-memory, else MemAvailable / ranks on the node)")
      << ", memory_utilization " << fmt("%.2f", in.memory_utilization) << "\n";
  out << "row: " << in.row_tokens << " tokens (prompt + max_new_tokens); max_seqs " << in.max_seqs
      << ", max_batch_tokens " << in.max_batch_tokens << "\n";
  out << "allreduce model: alpha " << fmt("%.2f", in.alpha_us) << " us, bus bandwidth "
      << fmt("%.1f", in.bandwidth_gbs) << " GB/s; per decode step of one stage = 2 x layers x (alpha + 2(t-1)/t x "
      << "max_seqs x hidden x bytes / B)";
  if (in.internode_gbs > 0 || in.internode_alpha_us > 0)
    out << "; between nodes (pipeline hand-offs) alpha "
        << fmt("%.2f", in.internode_alpha_us > 0 ? in.internode_alpha_us : in.alpha_us) << " us, bandwidth "
        << fmt("%.1f", in.internode_gbs > 0 ? in.internode_gbs : in.bandwidth_gbs) << " GB/s";
  out << "\n\n";

  char line[256];
  std::snprintf(line, sizeof line, "%4s %4s %4s %14s %12s %12s %14s %10s %5s %14s\n", "TP", "PP", "DP",
                "weights GiB", "KV KiB/tok", "reserved GiB", "KV tokens", "rows", "fits", "allreduce us");
  out << line;
  for (const auto& g : plan.layouts) {
    std::snprintf(line, sizeof line, "%4d %4d %4d %14.2f %12.2f %12.2f %14lld %10lld %5s %14.1f\n", g.tensor,
                  g.pipeline, g.data, static_cast<double>(g.weights_bytes_per_rank) / kGiB,
                  static_cast<double>(g.kv_bytes_per_token_per_rank) / 1024.0,
                  static_cast<double>(g.reserved_bytes_per_rank) / kGiB, static_cast<long long>(g.kv_tokens_per_rank),
                  static_cast<long long>(g.concurrent_rows), g.fits ? "yes" : "no", g.allreduce_us_per_decode_step);
    out << line;
  }
  out << "\n(per rank; KV tokens and rows for the tightest rank of the layout; rows = concurrent rows of "
      << in.row_tokens << " tokens per replica)\n";
  if (config.num_experts > 0) print_expert_splits(config, in, out);
  if (plan.throughput)
    out << "recommended for throughput: " << layout_name(plan.layouts[*plan.throughput])
        << " (the most predicted output tokens/s in total of the layouts that fit: "
        << fmt("%.1f", plan.throughput_tokens_per_s) << ", each at the rows its replicas hold up to max_seqs)\n";
  else
    out << "recommended for throughput: none (no layout fits)\n";
  if (plan.latency)
    out << "recommended for latency:    " << layout_name(plan.layouts[*plan.latency])
        << " (largest tensor parallelism within a node that fits)\n";
  else
    out << "recommended for latency:    none (no layout fits)\n";
}

namespace {

// Flags that cannot be right are named before anything is read.
void check_plan_flags(const PlanOptions& o) {
  if (o.world_size < 0) throw JobError("--world-size must be at least 1");
  if (o.ranks_per_node < 0) throw JobError("--ranks-per-node must be at least 1");
  if (o.device_memory_gib < 0 || !std::isfinite(o.device_memory_gib))
    throw JobError("--device-memory must be a positive size in GiB");
  if (o.row_tokens < 0) throw JobError("--row-tokens must be at least 1");
  if (o.bandwidth_gbs == 0 || !std::isfinite(o.bandwidth_gbs) || !std::isfinite(o.alpha_us))
    throw JobError("--bandwidth-gbs must be positive and --alpha-us non-negative");
  if (o.internode_gbs == 0 || !std::isfinite(o.internode_gbs) || !std::isfinite(o.internode_alpha_us))
    throw JobError("--internode-gbs must be positive and --internode-alpha-us non-negative");
}

// A plan needs the model's config.json only (docs/plan.md), not the input: the job is loaded with
// input.path pointing at a file that exists (the job file itself), which plan never reads.
JobSpec load_job_for_plan(const PlanOptions& o) {
  std::vector<std::string> sets = o.sets;
  std::error_code ec;
  const std::filesystem::path job_file = std::filesystem::absolute(o.job_path, ec);
  if (!ec && std::filesystem::is_regular_file(job_file, ec)) sets.push_back("input.path=" + job_file.string());
  return load_job(o.job_path, sets);
}

// Tokens a row holds: --row-tokens, else a 1024-token prompt and the job's new tokens.
int64_t plan_row_tokens(const PlanOptions& o, const JobSpec& job, const ModelConfig& cfg) {
  return o.row_tokens > 0 ? o.row_tokens
                          : std::min<int64_t>(cfg.max_position_embeddings, 1024 + job.sampling.max_new_tokens);
}

// --calibrate measures first: under mpirun every rank takes part in the allreduce, then only rank
// 0 goes on (and measures memory and GEMM alone, the others idle).
// The GEMMs at the weights' dtype and the attention at the cache's, the row shape the speed
// report will use, and the threads a run's rank gets (engine.threads, else topology/cpu_share.h's).
Calibration calibrate_for_plan(const PlanOptions& o, const JobSpec& job, const ModelConfig& cfg) {
  CalibrationRequest req;
  req.memory = o.speed.memory_gbs <= 0;
  req.gemm = o.speed.gemm_tflops <= 0;
  req.threads = static_cast<int>(job.engine.threads);
  const RunDtypes dtypes = plan_dtypes(job, cfg, "cpu");  // calibration measures this machine's CPU
  req.weight = dtypes.weights;
  req.kv = dtypes.kv_cache;
  req.new_tokens = o.speed.new_tokens > 0 ? o.speed.new_tokens : std::max<int64_t>(1, job.sampling.max_new_tokens);
  req.prompt_tokens = o.speed.prompt_tokens > 0 ? o.speed.prompt_tokens
                                                : std::max<int64_t>(1, plan_row_tokens(o, job, cfg) - req.new_tokens);
  req.rows = o.speed.rows > 0 ? o.speed.rows : job.engine.max_seqs;
  return calibrate_machine(cfg, req);
}

// Where the figures of a plan come from: the preset named, the one whose figures apply (an
// accelerator's, on cuda), the device planned for, and what --calibrate measured.
struct PlanSources {
  const HardwarePreset* preset = nullptr;
  const HardwarePreset* figures = nullptr;
  std::string device;
  std::optional<Calibration> calibration;
  bool alpha_measured = false, beta_measured = false;
};

// The layout search's inputs: the flags first, then the job, the measurements and the presets.
PlanInputs plan_inputs(const PlanOptions& o, const JobSpec& job, const ModelConfig& cfg, const PlanSources& src) {
  const HardwarePreset* figures = src.figures;
  PlanInputs in;
  in.preset = src.preset ? src.preset->name : "";
  in.world_size = o.world_size > 0 ? o.world_size : static_cast<int>(job.parallel.tensor * job.parallel.pipeline);
  in.ranks_per_node = o.ranks_per_node > 0                 ? o.ranks_per_node
                      : job.parallel.ranks_per_node > 0    ? static_cast<int>(job.parallel.ranks_per_node)
                      : figures && figures->gpus_per_node > 0 ? std::min(figures->gpus_per_node, in.world_size)
                                                              : in.world_size;
  const double device_memory_gib =
      o.device_memory_gib > 0 ? o.device_memory_gib : figures ? figures->device_memory_gib() : 0.0;
  if (src.device == "cuda" && device_memory_gib <= 0)
    throw JobError("planning for device cuda needs --device-memory GiB (the memory of one GPU) or --preset " +
                   hardware_preset_names("|"));
  const RunDtypes dtypes = plan_dtypes(job, cfg, src.device);
  in.weight_dtype = dtypes.weights;
  in.kv_dtype = dtypes.kv_cache;
  in.activation_dtype = dtypes.activations;
  in.accelerator = src.device == "cuda";
  if (device_memory_gib > 0) {
    in.device_memory_bytes = static_cast<int64_t>(std::llround(device_memory_gib * kGiB));
  } else {
    const int local = std::max(1, std::min(in.ranks_per_node, in.world_size));
    in.device_memory_bytes = host_memory_for_plan() / local;
  }
  in.memory_utilization = job.engine.memory_utilization;
  in.max_batch_tokens = job.engine.max_batch_tokens;
  in.max_seqs = job.engine.max_seqs;
  in.experts = job.parallel.experts;
  in.row_tokens = plan_row_tokens(o, job, cfg);
  // The collectives' figures: a flag's, else measured (below), else the preset's, else on an
  // accelerator the default preset's, else the CPU defaults.
  const HardwarePreset* rates = figures ? figures : in.accelerator ? &default_accelerator_preset() : nullptr;
  in.alpha_us = o.alpha_us >= 0 ? o.alpha_us : rates ? rates->nvlink_alpha_us : kCpuAlphaUs;
  in.bandwidth_gbs = o.bandwidth_gbs > 0 ? o.bandwidth_gbs : rates ? rates->allreduce_gbs() : kCpuBusBandwidthGBs;
  const std::optional<Calibration>& calibration = src.calibration;
  if (src.alpha_measured)
    in.alpha_us = calibration->synced_alpha_us > 0 ? calibration->synced_alpha_us : calibration->alpha_us;
  if (src.beta_measured) in.bandwidth_gbs = calibration->allreduce_gbs;
  in.internode_alpha_us = o.internode_alpha_us >= 0 ? o.internode_alpha_us : rates ? rates->internode_alpha_us : 0.0;
  in.internode_gbs = o.internode_gbs > 0 ? o.internode_gbs : rates ? rates->internode_gbs() : 0.0;
  return in;
}

}  // namespace

int run_plan(const PlanOptions& o, std::ostream& out) {
  PlanSources src;
  // An unknown preset is named before anything else is read.
  src.preset = o.preset.empty() ? nullptr : &hardware_preset(o.preset);
  check_plan_flags(o);
  const JobSpec job = load_job_for_plan(o);
  const ModelConfig cfg = load_model_config(job.model);
  if (const std::string p = expert_split_problem(cfg, job.parallel.experts, 1); !p.empty()) throw JobError(p);

  // The preset `cpu` measures this machine; an accelerator's preset gives the figures a flag does
  // not (flag > measured > preset > default, each figure on its own).
  src.device = plan_device(o, job, src.preset);
  src.figures = src.preset && !src.preset->measure_this_machine && src.device == "cuda" ? src.preset : nullptr;
  SpeedRequest speed_request = o.speed;
  speed_request.calibrate = o.speed.calibrate || (src.preset && src.preset->measure_this_machine);
  speed_request.preset = src.figures;
  if (speed_request.calibrate) {
    src.calibration = calibrate_for_plan(o, job, cfg);
    if (src.calibration->mpi_rank != 0) return kExitOk;
  }
  const std::optional<Calibration>& calibration = src.calibration;
  const HardwarePreset* figures = src.figures;
  src.alpha_measured = o.alpha_us < 0 && calibration && calibration->allreduce_measured;
  src.beta_measured = o.bandwidth_gbs <= 0 && calibration && calibration->allreduce_measured;
  const bool alpha_measured = src.alpha_measured, beta_measured = src.beta_measured;
  const PlanInputs in = plan_inputs(o, job, cfg, src);

  Plan plan = make_plan(cfg, in);
  const std::string weights = dtype_word(in.weight_dtype);
  const std::string dtype = job.dtype == DTypeChoice::kAuto ? weights + " (auto)" : weights;
  // Every plan predicts each layout's speed: the throughput recommendation is the fastest of them.
  const bool given = o.alpha_us >= 0 || o.bandwidth_gbs > 0;
  const std::string allreduce_source = alpha_measured || beta_measured ? (given ? "measured and given" : "measured")
                                       : given                         ? "given"
                                       : figures                       ? "preset " + figures->name
                                                                       : "default";
  speed_request.alpha_measured = alpha_measured;  // then each layout takes the alpha measured at its TP size
  const SpeedReport speed =
      make_speed_report(speed_request, calibration, allreduce_source, plan, cfg, job.sampling.max_new_tokens);
  recommend_layouts(plan, speed);
  const bool show_speed = wants_speed(speed_request);
  if (o.json) {
    json j = json::parse(plan_json(plan, cfg, job.model, weights));
    if (show_speed) add_speed_json(j, speed);
    out << j.dump(2) << "\n";
  } else {
    print_plan_text(plan, cfg, job.model, dtype, out);
    if (show_speed)
      print_speed_text(speed, plan, out);
    else
      out << "(throughput predicted with the default "
          << (in.accelerator ? std::string(kDefaultAcceleratorPreset) + " rates" : std::string("cpu figures"))
          << "; --preset " << hardware_preset_names("|")
          << ", --calibrate or --memory-gbs / --gemm-tflops print the speed table)\n";
  }
  return kExitOk;
}

}  // namespace tpbatch
