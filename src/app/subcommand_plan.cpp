// `tpbatch plan JOB.yaml [--preset NAME] [--world-size N] ... [--json]`: plan/plan_command.h
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "app/subcommands.h"
#include "plan/hardware_presets.h"
#include "plan/plan_command.h"

namespace tpbatch {

Subcommand add_plan_subcommand(CLI::App& program) {
  struct Args {
    PlanOptions po;
    std::string gemm_rates;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = program.add_subcommand("plan", "per-rank memory ledger and recommended layouts (no MPI, no weights)");
  cmd->add_option("job", a->po.job_path, "job file (YAML)")->required();
  cmd->add_option("--preset", a->po.preset,
                   "hardware figures of a node (" + hardware_preset_names() +
                       "); a flag given overrides its figure:" + hardware_presets_help());
  cmd->add_option("--set", a->po.sets, "override a job key (repeatable)");
  cmd->add_option("--world-size", a->po.world_size, "ranks (default: tensor x pipeline of the job)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ranks-per-node", a->po.ranks_per_node, "ranks per node (default: job's, else world size)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--device-memory", a->po.device_memory_gib, "memory per rank in GiB (default: CPU MemAvailable)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--device", a->po.device, "cpu | cuda (default: the job's device:; auto = cuda with --device-memory)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--row-tokens", a->po.row_tokens, "tokens of one row (default: min(max_pos, 1024 + max_new_tokens))")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--alpha-us", a->po.alpha_us, "allreduce latency in us")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--bandwidth-gbs", a->po.bandwidth_gbs, "allreduce bus bandwidth in GB/s")->check(CLI::Range(1e-6, 1e9));
  cmd->add_option("--internode-alpha-us", a->po.internode_alpha_us, "pipeline hand-off latency between nodes in us")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--internode-gbs", a->po.internode_gbs, "pipeline hand-off bandwidth between nodes in GB/s")
      ->check(CLI::Range(1e-6, 1e9));
  cmd->add_flag("--json", a->po.json, "print one JSON object");
  cmd->add_option("--allreduce-gbs", a->po.bandwidth_gbs, "allreduce bus bandwidth in GB/s (= --bandwidth-gbs)")
      ->check(CLI::Range(1e-6, 1e9));
  cmd->add_flag("--calibrate", a->po.speed.calibrate,
                 "measure read bandwidth, GEMM rate (and MPI allreduce under mpirun) and predict each layout's speed");
  cmd->add_option("--memory-gbs", a->po.speed.memory_gbs, "memory read bandwidth in GB/s (node total on CPU); predicts speed")
      ->check(CLI::Range(1e-6, 1e12));
  cmd->add_option("--gemm-tflops", a->po.speed.gemm_tflops, "GEMM peak in TFLOP/s (node total on CPU); predicts speed")
      ->check(CLI::Range(1e-9, 1e9));
  cmd->add_option("--gemm-half-rows", a->po.speed.gemm_half_rows, "token rows at which GEMM reaches half its peak (0: none)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--gemm-rates", a->gemm_rates,
                   "GEMM rate at decode rows, ROWS:TFLOPS,... ascending (node total on CPU; default: measured or none)");
  cmd->add_option("--attention-tflops", a->po.speed.attention_tflops,
                   "decode paged-attention rate in TFLOP/s (node total on CPU; 0: KV bytes / bandwidth only)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--prefill-attention-tflops", a->po.speed.prefill_attention_tflops,
                   "prefill attention rate in TFLOP/s (node total on CPU; 0: at the GEMM rate)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--layer-overhead-us", a->po.speed.layer_overhead_us,
                   "element-wise work per row per layer in us (node equivalent on CPU; 0: none)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--logits-overhead-us", a->po.speed.logits_overhead_us,
                   "final norm + logit statistics per row over the vocabulary in us (node equivalent on CPU; 0: none)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--oversubscription", a->po.speed.oversubscription,
                   "CPU: ranks x threads per rank / cores of the node, when above 1 (default: measured or 1)")
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--prompt-tokens", a->po.speed.prompt_tokens, "prompt tokens of the row shape (default: row - new)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--new-tokens", a->po.speed.new_tokens, "new tokens of the row shape (default: max_new_tokens)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--rows", a->po.speed.rows, "concurrent rows per replica (default: min(max_seqs, rows that fit))")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));

  return {cmd, [a] {
            if (!a->gemm_rates.empty()) a->po.speed.gemm_rates = parse_gemm_rates(a->gemm_rates);
            return run_plan(a->po, std::cout);
          }};
}

}  // namespace tpbatch
