// tpbatch: an MPI-launched batch inference job runner.
//   tpbatch JOB.yaml | tpbatch run JOB.yaml [--set KEY=VALUE ...] [--shard INDEX/COUNT|slurm]
//   tpbatch plan JOB.yaml [--preset h100|h200|a100|cpu] [--world-size N] [--ranks-per-node N] [--device-memory GiB] [--device cpu|cuda] [--json]
//   tpbatch inspect RESULTS.h5
//   tpbatch merge OUT.h5 PARTS.h5... [--force]
//   tpbatch make-model DIR [--preset tiny|125m|8b ...]
//   tpbatch export RESULTS.h5 --format openai|jsonl [--output FILE] [--input FILE.jsonl]
//   tpbatch render-chat --template FILE --messages FILE.json [--bos-token T] [--eos-token T]
//   tpbatch job-keys
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "app/export_command.h"
#include "app/run_job.h"
#include "backend/cpu/blas_core.h"
#include "chat/render_chat_command.h"
#include "common/error.h"
#include "common/log.h"
#include "common/version.h"
#include "job/shard.h"
#include "io/merge_results.h"
#include "io/inspect_results.h"
#include "job/job_keys_markdown.h"
#include "plan/hardware_presets.h"
#include "plan/plan_command.h"
#include "reliability/shutdown.h"
#include "tools/make_model.h"
#ifdef TPBATCH_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

int main(int argc, char** argv) {
  using namespace tpbatch;
  ensure_fast_blas_core(argv);

  // `tpbatch JOB.yaml` is `tpbatch run JOB.yaml`.
  std::vector<std::string> args(argv + 1, argv + argc);
  static const std::set<std::string> kCommands = {"run",    "plan",  "inspect", "make-model", "render-chat",
                                                  "export", "merge", "job-keys"};
  if (!args.empty() && !kCommands.count(args[0]) && args[0].rfind("-", 0) != 0) args.insert(args.begin(), "run");

  CLI::App app{"tpbatch: MPI batch inference for decoder-only transformers", "tpbatch"};
#if defined(TPBATCH_CUDA_EMULATED)
  app.set_version_flag("--version,-V",
                       std::string("tpbatch ") + version() + " (CUDA backend on the EMULATED device: " + cuda_build_info() + ")");
#elif defined(TPBATCH_HAVE_CUDA)
  app.set_version_flag("--version,-V", std::string("tpbatch ") + version() + " (CUDA backend: " + cuda_build_info() + ")");
#else
  app.set_version_flag("--version,-V", std::string("tpbatch ") + version());
#endif
  app.require_subcommand(1);

  std::string job_path, results_path, model_dir;
  std::vector<std::string> sets;
  auto* run = app.add_subcommand("run", "run a job (also: tpbatch JOB.yaml)");
  run->add_option("job", job_path, "job file (YAML)")->required();
  run->add_option("--set", sets, "override a job key: --set parallel.tensor=4 (repeatable)");
  std::string shard;
  auto* shard_opt = run->add_option("--shard", shard,
                                    "run one shard of the input: INDEX/COUNT (0-based), or slurm (the array task's); "
                                    "= --set input.shard=...");

  PlanOptions po;
  auto* plan = app.add_subcommand("plan", "per-rank memory ledger and recommended layouts (no MPI, no weights)");
  plan->add_option("job", po.job_path, "job file (YAML)")->required();
  plan->add_option("--preset", po.preset,
                   "hardware figures of a node (" + hardware_preset_names() +
                       "); a flag given overrides its figure:" + hardware_presets_help());
  plan->add_option("--set", po.sets, "override a job key (repeatable)");
  plan->add_option("--world-size", po.world_size, "ranks (default: tensor x pipeline of the job)")
      ->check(CLI::Range(1, 1 << 20));
  plan->add_option("--ranks-per-node", po.ranks_per_node, "ranks per node (default: job's, else world size)")
      ->check(CLI::Range(1, 1 << 20));
  plan->add_option("--device-memory", po.device_memory_gib, "memory per rank in GiB (default: CPU MemAvailable)")
      ->check(CLI::Range(0.001, 1e6));
  plan->add_option("--device", po.device, "cpu | cuda (default: the job's device:; auto = cuda with --device-memory)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  plan->add_option("--row-tokens", po.row_tokens, "tokens of one row (default: min(max_pos, 1024 + max_new_tokens))")
      ->check(CLI::Range(1, 1 << 30));
  plan->add_option("--alpha-us", po.alpha_us, "allreduce latency in us")->check(CLI::Range(0.0, 1e9));
  plan->add_option("--bandwidth-gbs", po.bandwidth_gbs, "allreduce bus bandwidth in GB/s")->check(CLI::Range(1e-6, 1e9));
  plan->add_option("--internode-alpha-us", po.internode_alpha_us, "pipeline hand-off latency between nodes in us")
      ->check(CLI::Range(0.0, 1e9));
  plan->add_option("--internode-gbs", po.internode_gbs, "pipeline hand-off bandwidth between nodes in GB/s")
      ->check(CLI::Range(1e-6, 1e9));
  plan->add_flag("--json", po.json, "print one JSON object");
  plan->add_option("--allreduce-gbs", po.bandwidth_gbs, "allreduce bus bandwidth in GB/s (= --bandwidth-gbs)")
      ->check(CLI::Range(1e-6, 1e9));
  plan->add_flag("--calibrate", po.speed.calibrate,
                 "measure read bandwidth, GEMM rate (and MPI allreduce under mpirun) and predict each layout's speed");
  plan->add_option("--memory-gbs", po.speed.memory_gbs, "memory read bandwidth in GB/s (node total on CPU); predicts speed")
      ->check(CLI::Range(1e-6, 1e12));
  plan->add_option("--gemm-tflops", po.speed.gemm_tflops, "GEMM peak in TFLOP/s (node total on CPU); predicts speed")
      ->check(CLI::Range(1e-9, 1e9));
  plan->add_option("--gemm-half-rows", po.speed.gemm_half_rows, "token rows at which GEMM reaches half its peak (0: none)")
      ->check(CLI::Range(0.0, 1e9));
  std::string plan_gemm_rates;
  plan->add_option("--gemm-rates", plan_gemm_rates,
                   "GEMM rate at decode rows, ROWS:TFLOPS,... ascending (node total on CPU; default: measured or none)");
  plan->add_option("--attention-tflops", po.speed.attention_tflops,
                   "decode paged-attention rate in TFLOP/s (node total on CPU; 0: KV bytes / bandwidth only)")
      ->check(CLI::Range(0.0, 1e9));
  plan->add_option("--prefill-attention-tflops", po.speed.prefill_attention_tflops,
                   "prefill attention rate in TFLOP/s (node total on CPU; 0: at the GEMM rate)")
      ->check(CLI::Range(0.0, 1e9));
  plan->add_option("--layer-overhead-us", po.speed.layer_overhead_us,
                   "element-wise work per row per layer in us (node equivalent on CPU; 0: none)")
      ->check(CLI::Range(0.0, 1e9));
  plan->add_option("--logits-overhead-us", po.speed.logits_overhead_us,
                   "final norm + logit statistics per row over the vocabulary in us (node equivalent on CPU; 0: none)")
      ->check(CLI::Range(0.0, 1e9));
  plan->add_option("--oversubscription", po.speed.oversubscription,
                   "CPU: ranks x threads per rank / cores of the node, when above 1 (default: measured or 1)")
      ->check(CLI::Range(1.0, 1e6));
  plan->add_option("--prompt-tokens", po.speed.prompt_tokens, "prompt tokens of the row shape (default: row - new)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  plan->add_option("--new-tokens", po.speed.new_tokens, "new tokens of the row shape (default: max_new_tokens)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  plan->add_option("--rows", po.speed.rows, "concurrent rows per replica (default: min(max_seqs, rows that fit))")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));

  auto* inspect = app.add_subcommand("inspect", "summarize a results file");
  inspect->add_option("results", results_path, "results file (HDF5)")->required();

  MakeModelOptions mm;
  auto* make = app.add_subcommand("make-model", "write a model folder with seeded random weights");
  make->add_option("dir", model_dir, "output folder")->required();
  make->add_option("--preset", mm.preset, "tiny | 125m | 8b")->capture_default_str();
  make->add_option("--architecture", mm.architecture, "LlamaForCausalLM | Qwen2ForCausalLM | MistralForCausalLM");
  make->add_option("--hidden-size", mm.hidden_size);
  make->add_option("--intermediate-size", mm.intermediate_size);
  make->add_option("--layers", mm.num_layers);
  make->add_option("--heads", mm.num_heads);
  make->add_option("--kv-heads", mm.num_kv_heads);
  make->add_option("--head-dim", mm.head_dim);
  make->add_option("--vocab-size", mm.vocab_size);
  make->add_option("--max-position-embeddings", mm.max_position_embeddings);
  make->add_option("--tie-word-embeddings", mm.tie_word_embeddings, "0 or 1");
  make->add_option("--dtype", mm.dtype, "float32 | bfloat16 | float16");
  make->add_option("--rope-scaling", mm.rope_scaling, "none | llama3");
  make->add_flag("--attention-bias", mm.attention_bias);
  make->add_option("--experts", mm.num_experts, "MoE architectures: experts per layer")->capture_default_str();
  make->add_option("--experts-per-token", mm.experts_per_token, "MoE: the router's top-k")->capture_default_str();
  make->add_option("--moe-intermediate-size", mm.moe_intermediate_size, "Qwen3-MoE: each expert's FFN width")
      ->capture_default_str();
  make->add_option("--norm-topk-prob", mm.norm_topk_prob, "Qwen3-MoE: renormalise the top-k weights (0 or 1)");
  make->add_option("--mlp-only-layers", mm.mlp_only_layers, "Qwen3-MoE: dense layers (comma-separated)")->delimiter(',');
  make->add_option("--seed", mm.seed);
  make->add_option("--quantize", mm.quantize, "none | fp8-block | fp8-channel: linear layers written as fp8 with scales")
      ->check(CLI::IsMember({"none", "fp8-block", "fp8-channel"}))
      ->capture_default_str();
  make->add_flag("--dequantize", mm.dequantize, "with --quantize: the same weights dequantized to float32 (the twin)");

  ExportOptions ex;
  auto* export_cmd = app.add_subcommand("export", "write a results file as JSON lines (OpenAI Batch API output or plain)");
  export_cmd->add_option("results", ex.results, "results file (HDF5)")->required();
  export_cmd->add_option("--format", ex.format, "openai | jsonl")->check(CLI::IsMember({"openai", "jsonl"}))->capture_default_str();
  export_cmd->add_option("--output,-o", ex.output, "output file (default or -: standard output)");
  export_cmd->add_option("--input", ex.input, "the job's input file (default: where the job read it, or where it lay relative to the results file)");

  MergeOptions mo;
  auto* merge = app.add_subcommand("merge", "join the results files of a sharded job's shards into one");
  merge->add_option("output", mo.output, "the merged results file")->required();
  merge->add_option("parts", mo.parts, "every shard's results file")->required();
  merge->add_flag("--force", mo.force, "replace an existing output file");

  RenderChatOptions rc;
  auto* render_chat = app.add_subcommand("render-chat", "print a chat template's rendering of a message list");
  render_chat->add_option("--template", rc.template_file, "Jinja chat template file")->required();
  render_chat->add_option("--messages", rc.messages_file, "JSON list of {role, content} messages")->required();
  render_chat->add_option("--bos-token", rc.bos_token, "the template's bos_token");
  render_chat->add_option("--eos-token", rc.eos_token, "the template's eos_token");
  render_chat->add_flag("--no-generation-prompt", rc.no_generation_prompt, "add_generation_prompt off");

  auto* job_keys_cmd = app.add_subcommand("job-keys", "print every job key, its values, default and meaning (Markdown)");

  std::vector<char*> cargv{argv[0]};
  for (auto& a : args) cargv.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadJob;
  }

  try {
    if (*run) {
      if (shard_opt->count() > 0) {  // checked here, so that a bad value is named as --shard
        if (shard.empty()) throw JobError("--shard '': give INDEX/COUNT (e.g. 3/16) or slurm");
        parse_shard(shard, "--shard", slurm_array_env());
        sets.push_back("input.shard=" + shard);  // last: it overrides the job file's and --set's
      }
      return run_job(job_path, sets);
    }
    if (*merge) return merge_results(mo, std::cout);
    if (*plan) {
      if (!plan_gemm_rates.empty()) po.speed.gemm_rates = parse_gemm_rates(plan_gemm_rates);
      return run_plan(po, std::cout);
    }
    // A damaged results file can crash libhdf5 itself: say which file, at least.
    const char* damaged = ": it is damaged or not a results file tpbatch wrote";
    if (*inspect) {
      name_fatal_signals_while("reading results file '" + results_path + "'" + damaged);
      inspect_results(results_path, std::cout);
      return kExitOk;
    }
    if (*export_cmd) {
      name_fatal_signals_while("reading results file '" + ex.results + "'" + damaged);
      return run_export(ex, std::cout);
    }
    if (*render_chat) return run_render_chat(rc, std::cout);
    if (*job_keys_cmd) {
      std::cout << job_keys_markdown();
      return kExitOk;
    }
    if (*make) {
      make_model(model_dir, mm);
      std::printf("wrote %s\n", model_dir.c_str());
      return kExitOk;
    }
  } catch (const Error& e) {
    log_error("%s", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    log_error("%s", e.what());
    return kExitFailure;
  }
  return kExitOk;
}
