#include "app/run_job.h"

#include <cblas.h>
#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

#include "app/collective_check.h"
#include "app/compute_plane.h"
#include "backend/backend.h"
#include "chat/chat_template.h"
#include "comm/singleton_start.h"
#include "common/error.h"
#include "common/log.h"
#include "common/saturating.h"
#include "common/version.h"
#include "engine/progress.h"
#include "engine/replica.h"
#include "engine/row_dispatcher.h"
#include "io/input_row.h"
#include "io/input_snapshot.h"
#include "io/output_paths.h"
#include "io/result_writer.h"
#include "job/job_spec.h"
#include "model/int4_checkpoint.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "model/run_dtypes.h"
#include "model/model_runner.h"
#include "model/safetensors.h"
#include "model/shard_placement.h"
#include "model/weight_checks.h"
#include "plan/memory_ledger.h"
#include "reliability/model_fingerprint.h"
#include "reliability/shutdown.h"
#include "reliability/fault_injection.h"
#include "reliability/liveness.h"
#include "tokenizer/tokenizer.h"
#include "topology/cpu_share.h"
#include "topology/topology.h"

namespace tpbatch {
namespace {

double resident_mib() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// KV cache blocks for this replica: engine.kv_cache_tokens, or what memory allows (never more
// than max_seqs full-length rows can use). Every rank of the replica takes the minimum. An
// engine.kv_cache_tokens past what memory allows (2^63-1 meant as "no limit") gets what memory
// allows, with a warning. Sized after the weights are resident: host memory is shared by the node's
// ranks, a GPU's is not. Every product saturates (common/saturating.h): none may wrap to a tiny cache.
int64_t kv_blocks(const JobSpec& job, const ModelConfig& cfg, const Topology& topo, const Backend& backend,
                  DType kv_dtype, bool host_memory, bool log) {
  const int64_t bs = job.engine.block_size;
  const Range layers = layers_of_stage(cfg.num_layers, topo.layout.pipeline, topo.coords.pp);
  const int64_t per_token = ModelRunner::kv_bytes_per_token(cfg, topo.layout.tensor, layers.size(), kv_dtype);
  const double sharing = host_memory ? topo.local_size : 1;
  const double budget = static_cast<double>(backend.memory_available()) * job.engine.memory_utilization / sharing;
  const int64_t fit = static_cast<int64_t>(std::min(budget / static_cast<double>(per_token), 9.0e18));
  int64_t tokens = job.engine.kv_cache_tokens;
  if (tokens <= 0) {
    tokens = std::min(fit, saturating_mul(job.engine.max_seqs, cfg.max_position_embeddings));
  } else if (tokens > fit) {
    if (log)
      log_warning("engine.kv_cache_tokens %lld is more than memory holds (%lld tokens at "
                   "engine.memory_utilization %.2f): the KV cache gets %lld", static_cast<long long>(tokens),
                   static_cast<long long>(fit), job.engine.memory_utilization, static_cast<long long>(fit));
    tokens = fit;
  }
  int64_t blocks = std::max<int64_t>(1, ceil_div_no_overflow(tokens, bs)), agreed = 0;
  MPI_Allreduce(&blocks, &agreed, 1, MPI_INT64_T, MPI_MIN, topo.replica->comm());
  return agreed;
}

// This rank's CPU threads (BLAS and OpenMP) and where the number comes from, for the start-up line:
// engine.threads, else the CPUs this rank may run on shared among the ranks of its machine that may
// run on them too (topology/cpu_share.h, as plan --calibrate measures). Collective over the world
// whether engine.threads is set or not: every rank calls it at the same point.
struct CpuThreads {
  int threads = 1;
  std::string why;
};
CpuThreads cpu_threads(const JobSpec& job) {
  const CpuShare share = cpu_share();
  if (job.engine.threads > 0) return {static_cast<int>(job.engine.threads), "engine.threads"};
  return {share.threads, std::to_string(share.own_cpus) + " CPU(s) this rank may run on, shared by up to " +
                             std::to_string(share.sharing) + " of the machine's " + std::to_string(share.local_ranks) +
                             " rank(s)"};
}

// One rank's job, filled in by run_job's steps in order. The members are in the order the steps
// make them, so they are destroyed in reverse (the writer after the runner, the topology last).
struct RankJob {
  int world_rank = 0, world_size = 1;
  bool log = false;  // rank 0 writes the start-up and summary lines
  JobSpec job;
  ModelConfig cfg;
  Topology topo;
  std::string model_fp;  // every rank must run the same job on the same model
  std::unique_ptr<ResultWriter> writer;  // rank 0's
  int64_t num_rows = 0;                  // results rows, known on rank 0
  int64_t num_lines = 0;                 // input lines (fewer than rows when some line has n > 1)
  RunInfo info;                          // what rank 0's results file records (its shard's lines and rows)
  std::optional<ComputePlane> plane;  // see ComputePlane for its teardown order
  std::optional<ModelRunner> runner;
  std::unique_ptr<Tokenizer> tokenizer;  // replica leaders'
};

// Steps returning int give collective_check's code: 0, or the exit code every rank ends with.

// Job spec and model config, checked on every rank before any weight is read; then the job and
// the model's fingerprint agreed by all ranks.
int read_and_agree_on_job(RankJob& r, const std::string& job_path, const std::vector<std::string>& sets,
                          Liveness& liveness) {
  int code = collective_check([&] {
    r.job = load_job(job_path, sets);
    check_output_apart_from_inputs(r.job, job_path);
    r.cfg = load_model_config(r.job.model);
    const std::string experts = expert_split_problem(r.cfg, r.job.parallel.experts, r.job.parallel.tensor);
    if (!experts.empty()) throw JobError(experts);
  });
  if (code) return code;
  liveness.set_timeout(r.job.engine.watchdog_seconds);
  maybe_stop_for_test("start-up", r.world_rank);
  code = collective_check([&] { r.model_fp = model_fingerprint(r.job.model); });
  if (code) return code;
  return check_ranks_agree(r.job.effective_yaml, r.model_fp);
}

int build_layout(RankJob& r) {
  const int code = collective_check([&] { r.topo = build_topology(r.job.parallel, r.cfg); });
  if (code) return code;
  if (r.log)
    log_info("%s %s; model %s", version(), r.topo.describe().c_str(), r.job.model.c_str());
  return 0;
}

// The tokenizer (replica leaders keep it) and the job's chat_template file, checked before the
// results file is touched: a model folder without tokenizer.json, or a template that does not
// parse, ends the job with the output as it was.
int load_tokenizer_and_check_chat_template(RankJob& r) {
  return collective_check([&] {
    if (!r.topo.is_replica_leader()) return;
    const std::filesystem::path tokenizer = std::filesystem::path(r.job.model) / "tokenizer.json";
    std::error_code ec;
    if (!std::filesystem::exists(tokenizer, ec))
      throw Error("model folder '" + r.job.model + "' has no tokenizer.json ('" + tokenizer.string() +
                  "' not found): tpbatch needs it to tokenize the input");
    r.tokenizer = Tokenizer::load(tokenizer);
    if (r.job.chat_template.empty()) return;
    try {
      (void)chat::ChatTemplate::load(r.job.model, r.job.chat_template);
    } catch (const Error& e) {
      throw JobError(std::string("chat_template: ") + e.what());
    }
  });
}

// The results file (rank 0 writes it): if_exists is honoured before loading the model. A new file
// (overwrite, or none there yet) replaces the output only once the first row is recorded.
int open_results(RankJob& r) {
  const JobSpec& job = r.job;
  const ModelConfig& cfg = r.cfg;
  const Topology& topo = r.topo;
  return collective_check([&] {
    if (r.world_rank != 0) return;
    const InputSnapshot input = snapshot_input(job.input.path, job);
    r.num_rows = input.rows;
    r.num_lines = input.lines;
    RunInfo info{job.model, task_name(job.task), job.effective_yaml, r.world_size, topo.layout.tensor, topo.layout.pipeline,
                 topo.layout.data(), r.num_rows, input.fingerprint, r.model_fp};
    if (!job.chat_template.empty()) info.chat_template_fingerprint = file_fingerprint(job.chat_template);
    info.input_path = job.input.path;
    if (job.task == Task::kEmbed) info.embedding_dim = cfg.hidden_size;
    info.truncated_tokens = job.input.truncate == Truncate::kLeft;
    info.samples = input.rows != input.lines;  // some line has n > 1: /input_line and /sample
    info.shard = job.shard;
    info.shard_lines = input.shard_lines;
    info.shard_rows = input.shard_rows;
    r.writer = ResultWriter::open(job.output.path, job.output.if_exists, info, FlushPolicy{job.output.flush_rows});
    r.info = info;
    if (job.shard.sharded())
      std::fprintf(stderr, "[tpbatch] %s of %lld input lines; results in %s\n", describe_shard(info).c_str(),
                   static_cast<long long>(input.lines), job.output.path.c_str());
  });
}

// The CPU threads, and the backend with its tensor- and pipeline-parallel communicators.
int make_backend(RankJob& r) {
  const CpuThreads cpu = cpu_threads(r.job);
  openblas_set_num_threads(cpu.threads);
  omp_set_num_threads(cpu.threads);  // the CPU backend's own loops (attention)
  const int code = collective_check([&] { r.plane.emplace(make_compute_plane(r.job, r.topo)); });
  if (code) return code;
  if (r.log) {
    log_info("backend %s (%s)", r.plane->backend->name().c_str(), r.plane->reason.c_str());
    log_info("CPU threads per rank: %d on rank 0 (%s)", cpu.threads, cpu.why.c_str());
  }
  return 0;
}

// The checkpoint's values and coverage, checked on its own: a rank failing inside the loading
// step would leave its peers in the step's own collectives.
int check_checkpoint(const RankJob& r) {
  return collective_check([&] {
    WeightStore weights = WeightStore::open(r.job.model);
    add_int4_weights(weights, r.cfg.quantization);
    check_weights_finite(weights, r.world_rank, r.world_size);
    const std::string unused = unused_tensors_warning(unused_layer_tensors(weights, r.cfg), r.cfg);
    if (r.log && !unused.empty()) log_warning("%s", unused.c_str());
  });
}

// This rank's shard of the weights and its KV cache, and the tokenizer on replica leaders.
int load_shard(RankJob& r) {
  const JobSpec& job = r.job;
  const ModelConfig& cfg = r.cfg;
  const Topology& topo = r.topo;
  Backend& backend = *r.plane->backend;
  return collective_check([&] {
    WeightStore weights = WeightStore::open(job.model);
    add_int4_weights(weights, cfg.quantization);
    const RunDtypes dtypes = run_dtypes(
        job, [&] { return weights.tensor("model.embed_tokens.weight").dtype; }, r.plane->device >= 0);
    const ShardPlacement place = shard_placement(cfg, topo.layout.tensor, topo.layout.pipeline, topo.coords.pp,
                                                 topo.coords.tp, job.parallel.experts);
    LlamaShard shard = load_llama_shard(cfg, weights, place, backend, dtypes.weights);
    weights.drop_page_cache();
    KvLayout kv;
    kv.dtype = dtypes.kv_cache;
    kv.block_size = job.engine.block_size;
    kv.num_blocks = kv_blocks(job, cfg, topo, backend, kv.dtype, r.plane->device < 0, topo.is_replica_leader());
    r.runner.emplace(std::move(shard), backend, *r.plane->tp, kv);
  });
}

// The weights' and KV cache's sizes, on rank 0 (every rank takes part in the reductions).
void report_memory(const RankJob& r) {
  const ModelConfig& cfg = r.cfg;
  const Topology& topo = r.topo;
  const ModelRunner& runner = *r.runner;
  double mine = static_cast<double>(runner.shard().weight_bytes()), most = 0, least = 0;
  MPI_Reduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&mine, &least, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  if (!r.log) return;
  const KvLayout& kv = runner.kv_layout();
  const int64_t kv_tokens = kv.num_blocks * kv.block_size;
  const QuantizationConfig& quant = cfg.quantization;
  const std::string linear =
      quant.quantized() ? std::string(", linear layers ") + dtype_name(quant.value_dtype()) + " (" + quant.describe() + ")"
                        : "";
  log_info("weights: %.2f MiB per rank (min %.2f; backend %s, %s weights%s); resident %.1f MiB on rank 0",
               most / (1 << 20), least / (1 << 20), r.plane->backend->name().c_str(),
               dtype_name(runner.shard().weight_dtype), linear.c_str(), resident_mib());
  log_info("KV cache: %lld tokens per rank (%lld bytes per token per rank, %s); max concurrency %.1f "
               "for %lld-token rows",
               static_cast<long long>(kv_tokens),
               static_cast<long long>(ModelRunner::kv_bytes_per_token(
                   cfg, topo.layout.tensor, layers_of_stage(cfg.num_layers, topo.layout.pipeline, 0).size(), kv.dtype)),
               dtype_name(kv.dtype),
               static_cast<double>(kv_tokens) / static_cast<double>(cfg.max_position_embeddings),
               static_cast<long long>(cfg.max_position_embeddings));
  std::fflush(stderr);
}

// Replica 0's steps and its leader's tensor-parallel collectives; the allreduce cost per step
// against the alpha-beta model T = alpha + 2(t-1)/t * S / B.
void report_replica_zero(const RankJob& r, const ReplicaStats& stats) {
  const Topology& topo = r.topo;
  const ComputePlane& plane = *r.plane;
  log_info("replica 0: %lld steps, preemptions: %lld, prefix cache hit tokens: %lld, long rope recomputed tokens: %lld",
               static_cast<long long>(stats.steps), static_cast<long long>(stats.preemptions),
               static_cast<long long>(stats.prefix_cache_hit_tokens),
               static_cast<long long>(stats.long_rope_recomputed_tokens));
  if (topo.layout.tensor <= 1) return;  // one rank per replica: its collectives are no-ops
  for (const auto& [name, st] : plane.tp->stats())
    log_info("rank 0 tensor-parallel %s: %lld calls, %lld bytes, %.3fs (%.2f per step)",
                 name.c_str(), static_cast<long long>(st.calls), static_cast<long long>(st.bytes), st.seconds,
                 stats.steps ? static_cast<double>(st.calls) / static_cast<double>(stats.steps) : 0.0);
  if (stats.steps > 0 && plane.tp->stats().count("allreduce")) {
    const CollectiveStats& ar = plane.tp->stats().at("allreduce");
    const double t = topo.layout.tensor, steps = static_cast<double>(stats.steps);
    const double model_s = ar.calls * kCpuAlphaUs * 1e-6 + 2 * (t - 1) / t * ar.bytes / (kCpuBusBandwidthGBs * 1e9);
    log_info("allreduce per step: %.1f calls, %.3f ms = %.1f%% of the step (%.3f ms); alpha-beta model "
                 "(alpha %.1f us, B %.1f GB/s): %.3f ms",
                 ar.calls / steps, ar.seconds / steps * 1e3, 100.0 * ar.seconds / std::max(1e-12, stats.step_seconds),
                 stats.step_seconds / steps * 1e3, kCpuAlphaUs, kCpuBusBandwidthGBs, model_s / steps * 1e3);
  }
}

// Rank 0: replica 0's leader and the dispatcher of every replica's rows, then the results file
// finished. Returns the job's exit code: never 0 with rows missing.
int run_rank_zero(RankJob& r, MPI_Comm control, ReplicaStats& stats) {
  const JobSpec& job = r.job;
  ResultWriter& writer = *r.writer;
  std::vector<uint8_t> done = writer.done_rows();
  const IndexRange rows = r.info.rows_wanted();
  int64_t already = 0;
  for (int64_t i = rows.begin; i < rows.end; ++i) already += done[static_cast<size_t>(i)];
  const int64_t wanted = rows.end - rows.begin;
  if (job.output.if_exists == IfExists::kResume && already > 0)
    log_info("resuming: %lld of %lld rows done (in %s); computing the other %lld", static_cast<long long>(already),
             static_cast<long long>(wanted), job.output.path.c_str(), static_cast<long long>(wanted - already));
  Progress progress(wanted, already, job.engine.progress_interval, stderr);
  RowDispatcher dispatcher(job.input.path, job, r.num_lines, done, writer, progress, control,
                           r.topo.layout.data() - 1);
  if (job.shard.sharded()) dispatcher.restrict_to_lines(r.info.shard_lines);
  auto source = make_local_work_source(dispatcher);
  dispatcher.serve_first_requests();
  stats = run_replica_leader(job, *r.tokenizer, *r.runner, r.topo, *r.plane->pp, *source);
  report_replica_zero(r, stats);
  while (!dispatcher.remote_replicas_done()) dispatcher.serve(true);
  if (r.topo.layout.data() > 1)
    log_info("input lines handed to each replica, by its leader's rank: %s",
                 dispatcher.lines_per_replica().c_str());
  progress.print_final();
  writer.finish(progress.metrics());
  int exit_code = kExitOk;
  const std::string missing = describe_missing_rows(writer.done_rows(), r.num_rows != r.num_lines, rows);
  if (!missing.empty() && !stop_requested()) {  // never exit 0 with rows missing
    log_error("the job ended with %s; rerun the same job (output.if_exists: resume) "
                 "to compute them", missing.c_str());
    exit_code = kExitFailure;
  }
  if (stop_requested()) {
    log_info("interrupted by a signal: finished rows are saved in %s; rerun the same job "
                 "(output.if_exists: resume) to compute the rest", job.output.path.c_str());
    exit_code = kExitFailure;
  }
  return exit_code;
}

// Every rank's part of the run: rank 0 as above, other replicas' leaders asking it for rows, the
// rest following their leader. From here on a failure on any rank aborts every rank (no rank may hang).
int run_rows(RankJob& r, ReplicaStats& stats) {
  int exit_code = kExitOk;
  try {
    MPI_Comm control;
    MPI_Comm_dup(MPI_COMM_WORLD, &control);
    maybe_stop_for_test("run", r.world_rank);
    if (r.world_rank == 0) {
      exit_code = run_rank_zero(r, control, stats);
    } else if (r.topo.is_replica_leader()) {
      auto source = make_remote_work_source(control);
      stats = run_replica_leader(r.job, *r.tokenizer, *r.runner, r.topo, *r.plane->pp, *source);
    } else {
      stats = run_replica_worker(*r.runner, r.topo, *r.plane->pp);
    }
    MPI_Comm_free(&control);
  } catch (const Error& e) {
    log_plain("tpbatch: error on rank %d: %s", r.world_rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, e.exit_code());
  } catch (const std::exception& e) {
    log_plain("tpbatch: error on rank %d: %s", r.world_rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitFailure);
  }
  return exit_code;
}

// Pipeline busy fraction per stage of replica 0: how much of the run each stage computed.
void report_pipeline_busy(const RankJob& r, const ReplicaStats& stats) {
  const Topology& topo = r.topo;
  if (topo.layout.pipeline <= 1) return;
  std::vector<double> busy(static_cast<size_t>(r.world_size));
  const double mine = stats.busy_fraction();
  MPI_Gather(&mine, 1, MPI_DOUBLE, busy.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (!r.log) return;
  std::string stages;
  for (int p = 0; p < topo.layout.pipeline; ++p) {
    char one[48];
    std::snprintf(one, sizeof one, " stage %d %.2f", p,
                  busy[static_cast<size_t>(world_rank_of(topo.layout, RankCoords{0, p, 0}))]);
    stages += one;
  }
  log_info("pipeline busy fraction per stage (replica 0):%s", stages.c_str());
}

}  // namespace

int run_job(const std::string& job_path, const std::vector<std::string>& sets) {
  // A rank waiting in MPI (a TP worker for its leader, rank 0 for results) gives its core away
  // instead of spinning: on a shared node a spinning wait starves the ranks that compute (a 2-rank
  // job beside two CPU burners: 29 s spinning, 10 s yielding, as fast as on a quiet machine). When
  // nothing else wants the core, sched_yield returns at once. The user's own setting wins.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  prepare_singleton_start();
  int provided = 0;  // MULTIPLE: the heartbeat thread calls MPI beside the main thread
  MPI_Init_thread(nullptr, nullptr, liveness_thread_level(), &provided);
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  // Start-up collectives are watched too: a rank stopped while the others wait ends the job.
  Liveness liveness(provided, JobSpec{}.engine.watchdog_seconds);
  auto finish = [&liveness](int code) {
    liveness.finish();  // a watched final barrier: ranks ending at different times are not taken for dead
    MPI_Finalize();
    return code;
  };
  RankJob r;  // after liveness, as the objects it holds always were: destroyed before it
  r.world_rank = world_rank;
  r.world_size = world_size;
  r.log = world_rank == 0;
  set_log_rank(world_rank);

  // 1. The job, the model and the layout, agreed and checked on every rank.
  if (int code = read_and_agree_on_job(r, job_path, sets, liveness)) return finish(code);
  if (int code = build_layout(r)) return finish(code);
  // 2. The tokenizer and chat template, then the results file, before the model is loaded.
  if (int code = load_tokenizer_and_check_chat_template(r)) return finish(code);
  if (int code = open_results(r)) return finish(code);
  // 3. The backend, this rank's shard of the weights, and the tokenizer.
  if (int code = make_backend(r)) return finish(code);
  if (int code = check_checkpoint(r)) return finish(code);
  if (int code = load_shard(r)) return finish(code);
  report_memory(r);
  // 4. Run.
  install_signal_handlers(r.world_rank);
  ReplicaStats stats;
  const int exit_code = run_rows(r, stats);
  report_pipeline_busy(r, stats);
  r.runner.reset();
  // The communicators, then the backend (ComputePlane's member order), and all of them before the
  // MPI communicators they run over.
  r.plane.reset();
  r.topo = Topology{};
  return finish(exit_code);
}

}  // namespace tpbatch
