#include "app/run_job.h"

#include <cblas.h>
#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "app/collective_check.h"
#include "app/compute_plane.h"
#include "backend/backend.h"
#include "common/error.h"
#include "common/version.h"
#include "engine/progress.h"
#include "engine/replica.h"
#include "engine/row_dispatcher.h"
#include "io/input_row.h"
#include "io/input_snapshot.h"
#include "io/result_writer.h"
#include "job/job_spec.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "model/model_runner.h"
#include "model/safetensors.h"
#include "model/weight_checks.h"
#include "plan/memory_ledger.h"
#include "reliability/model_fingerprint.h"
#include "reliability/shutdown.h"
#include "reliability/fault_injection.h"
#include "reliability/liveness.h"
#include "tokenizer/tokenizer.h"
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
// than max_seqs full-length rows can use). Every rank of the replica takes the minimum.
// Sized after the weights are resident: host memory is shared by the node's ranks, a GPU's is not.
int64_t kv_blocks(const JobSpec& job, const ModelConfig& cfg, const Topology& topo, const Backend& backend,
                  DType kv_dtype, bool host_memory) {
  const int64_t bs = job.engine.block_size;
  int64_t tokens = job.engine.kv_cache_tokens;
  if (tokens <= 0) {
    const Range layers = layers_of_stage(cfg.num_layers, topo.layout.pipeline, topo.coords.pp);
    const int64_t per_token = ModelRunner::kv_bytes_per_token(cfg, topo.layout.tensor, layers.size(), kv_dtype);
    const double sharing = host_memory ? topo.local_size : 1;
    const double budget = static_cast<double>(backend.memory_available()) * job.engine.memory_utilization / sharing;
    tokens = std::min<int64_t>(static_cast<int64_t>(budget / per_token), job.engine.max_seqs * cfg.max_position_embeddings);
  }
  int64_t blocks = std::max<int64_t>(1, (tokens + bs - 1) / bs), agreed = 0;
  MPI_Allreduce(&blocks, &agreed, 1, MPI_INT64_T, MPI_MIN, topo.replica->comm());
  return agreed;
}

int blas_threads(const JobSpec& job, const Topology& topo) {
  if (job.engine.threads > 0) return static_cast<int>(job.engine.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / topo.local_size);
}

}  // namespace

int run_job(const std::string& job_path, const std::vector<std::string>& sets) {
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

  // 1. Job spec, model config and layout: checked on every rank before any weight is read.
  JobSpec job;
  ModelConfig cfg;
  Topology topo;
  int code = collective_check([&] {
    job = load_job(job_path, sets);
    cfg = load_model_config(job.model);
  });
  if (code) return finish(code);
  liveness.set_timeout(job.engine.watchdog_seconds);
  maybe_stop_for_test("start-up", world_rank);
  std::string model_fp;  // every rank must run the same job on the same model
  code = collective_check([&] { model_fp = model_fingerprint(job.model); });
  if (code) return finish(code);
  code = check_ranks_agree(job.effective_yaml, model_fp);
  if (code) return finish(code);
  code = collective_check([&] { topo = build_topology(job.parallel, cfg); });
  if (code) return finish(code);
  const bool log = world_rank == 0;
  if (log) std::fprintf(stderr, "[tpbatch] %s %s; model %s\n", version(), topo.describe().c_str(), job.model.c_str());

  // 2. The results file (rank 0 writes it): if_exists is honoured before loading the model.
  std::unique_ptr<ResultWriter> writer;
  int64_t num_rows = 0;
  code = collective_check([&] {
    if (world_rank != 0) return;
    const InputSnapshot input = snapshot_input(job.input.path);
    num_rows = input.rows;
    RunInfo info{job.model, job.task, job.effective_yaml, world_size, topo.layout.tensor, topo.layout.pipeline,
                 topo.layout.data(), num_rows, input.fingerprint, model_fp};
    if (job.task == "embed") info.embedding_dim = cfg.hidden_size;
    info.truncated_tokens = job.input.truncate == "left";
    writer = ResultWriter::open(job.output.path, job.output.if_exists, info);
  });
  if (code) return finish(code);

  // 3. This rank's shard of the weights, and the tokenizer.
  openblas_set_num_threads(blas_threads(job, topo));
  omp_set_num_threads(blas_threads(job, topo));  // the CPU backend's own loops (attention)
  ComputePlane plane;
  code = collective_check([&] { plane = make_compute_plane(job, topo); });
  if (code) return finish(code);
  Backend& backend = *plane.backend;
  if (log) std::fprintf(stderr, "[tpbatch] backend %s (%s)\n", backend.name().c_str(), plane.reason.c_str());
  // The checkpoint's values and coverage, checked on its own: a rank failing inside the loading
  // step below would leave its peers in the step's own collectives.
  code = collective_check([&] {
    const WeightStore weights = WeightStore::open(job.model);
    check_weights_finite(weights, world_rank, world_size);
    const std::string unused = unused_tensors_warning(unused_layer_tensors(weights, cfg), cfg);
    if (log && !unused.empty()) std::fprintf(stderr, "[tpbatch] warning: %s\n", unused.c_str());
  });
  if (code) return finish(code);
  std::optional<ModelRunner> runner;
  std::unique_ptr<Tokenizer> tokenizer;
  code = collective_check([&] {
    WeightStore weights = WeightStore::open(job.model);
    const DType wt = weight_dtype_for(job.dtype, weights.tensor("model.embed_tokens.weight").dtype);
    ShardPlacement place;
    place.tensor = topo.layout.tensor;
    place.tp_rank = topo.coords.tp;
    place.layers = layers_of_stage(cfg.num_layers, topo.layout.pipeline, topo.coords.pp);
    place.has_embedding = topo.coords.pp == 0;
    place.has_lm_head = topo.coords.pp == topo.layout.pipeline - 1;
    LlamaShard shard = load_llama_shard(cfg, weights, place, backend, wt);
    weights.drop_page_cache();
    KvLayout kv;
    kv.dtype = kv_cache_dtype(job, backend);
    kv.block_size = job.engine.block_size;
    kv.num_blocks = kv_blocks(job, cfg, topo, backend, kv.dtype, plane.device < 0);
    runner.emplace(std::move(shard), backend, *plane.tp, kv);
    if (topo.is_replica_leader()) tokenizer = Tokenizer::load(std::filesystem::path(job.model) / "tokenizer.json");
  });
  if (code) return finish(code);
  {
    double mine = static_cast<double>(runner->shard().weight_bytes()), most = 0, least = 0;
    MPI_Reduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &least, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    if (log) {
      const KvLayout& kv = runner->kv_layout();
      const int64_t kv_tokens = kv.num_blocks * kv.block_size;
      std::fprintf(stderr,
                   "[tpbatch] weights: %.2f MiB per rank (min %.2f; backend %s, %s weights); resident %.1f MiB on rank 0\n",
                   most / (1 << 20), least / (1 << 20), backend.name().c_str(), dtype_name(runner->shard().weight_dtype),
                   resident_mib());
      std::fprintf(stderr,
                   "[tpbatch] KV cache: %lld tokens per rank (%lld bytes per token per rank, %s); max concurrency %.1f "
                   "for %lld-token rows\n",
                   static_cast<long long>(kv_tokens),
                   static_cast<long long>(ModelRunner::kv_bytes_per_token(
                       cfg, topo.layout.tensor, layers_of_stage(cfg.num_layers, topo.layout.pipeline, 0).size(), kv.dtype)),
                   dtype_name(kv.dtype),
                   static_cast<double>(kv_tokens) / static_cast<double>(cfg.max_position_embeddings),
                   static_cast<long long>(cfg.max_position_embeddings));
      std::fflush(stderr);
    }
  }

  // 4. Run. From here on a failure on any rank aborts every rank (no rank may hang).
  install_signal_handlers(world_rank);
  ReplicaStats stats;
  int exit_code = kExitOk;
  try {
    MPI_Comm control;
    MPI_Comm_dup(MPI_COMM_WORLD, &control);
    maybe_stop_for_test("run", world_rank);
    const int replicas = topo.layout.data();
    if (world_rank == 0) {
      std::vector<uint8_t> done = writer->done_rows();
      int64_t already = 0;
      for (uint8_t d : done) already += d;
      Progress progress(num_rows, already, job.engine.progress_interval, stderr);
      RowDispatcher dispatcher(job.input.path, done, *writer, progress, control, replicas - 1);
      auto source = make_local_work_source(dispatcher);
      stats = run_replica_leader(job, *tokenizer, *runner, topo, *plane.pp, *source);
      std::fprintf(stderr, "[tpbatch] replica 0: %lld steps, preemptions: %lld, prefix cache hit tokens: %lld\n",
                   static_cast<long long>(stats.steps), static_cast<long long>(stats.preemptions),
                   static_cast<long long>(stats.prefix_cache_hit_tokens));
      for (const auto& [name, st] : plane.tp->stats())
        std::fprintf(stderr, "[tpbatch] rank 0 tensor-parallel %s: %lld calls, %lld bytes, %.3fs (%.2f per step)\n",
                     name.c_str(), static_cast<long long>(st.calls), static_cast<long long>(st.bytes), st.seconds,
                     stats.steps ? static_cast<double>(st.calls) / static_cast<double>(stats.steps) : 0.0);
      // Allreduce cost per step against the alpha-beta model T = alpha + 2(t-1)/t * S / B.
      if (topo.layout.tensor > 1 && stats.steps > 0 && plane.tp->stats().count("allreduce")) {
        const CollectiveStats& ar = plane.tp->stats().at("allreduce");
        const double t = topo.layout.tensor, steps = static_cast<double>(stats.steps);
        const double model_s = ar.calls * kCpuAlphaUs * 1e-6 + 2 * (t - 1) / t * ar.bytes / (kCpuBusBandwidthGBs * 1e9);
        std::fprintf(stderr,
                     "[tpbatch] allreduce per step: %.1f calls, %.3f ms = %.1f%% of the step (%.3f ms); alpha-beta model "
                     "(alpha %.1f us, B %.1f GB/s): %.3f ms\n",
                     ar.calls / steps, ar.seconds / steps * 1e3, 100.0 * ar.seconds / std::max(1e-12, stats.step_seconds),
                     stats.step_seconds / steps * 1e3, kCpuAlphaUs, kCpuBusBandwidthGBs, model_s / steps * 1e3);
      }
      while (!dispatcher.remote_replicas_done()) dispatcher.serve(true);
      progress.print_final();
      writer->finish(progress.metrics());
      const std::string missing = describe_missing_rows(writer->done_rows());
      if (!missing.empty() && !stop_requested()) {  // never exit 0 with rows missing
        std::fprintf(stderr, "tpbatch: error: the job ended with %s; rerun the same job (output.if_exists: resume) "
                     "to compute them\n", missing.c_str());
        exit_code = kExitFailure;
      }
      if (stop_requested()) {
        std::fprintf(stderr, "[tpbatch] interrupted by a signal: finished rows are saved in %s; rerun the same job "
                     "(output.if_exists: resume) to compute the rest\n", job.output.path.c_str());
        exit_code = kExitFailure;
      }
    } else if (topo.is_replica_leader()) {
      auto source = make_remote_work_source(control);
      stats = run_replica_leader(job, *tokenizer, *runner, topo, *plane.pp, *source);
    } else {
      stats = run_replica_worker(*runner, topo, *plane.pp);
    }
    MPI_Comm_free(&control);
  } catch (const Error& e) {
    std::fprintf(stderr, "tpbatch: error on rank %d: %s\n", world_rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, e.exit_code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpbatch: error on rank %d: %s\n", world_rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitFailure);
  }
  // Pipeline busy fraction per stage of replica 0: how much of the run each stage computed.
  if (topo.layout.pipeline > 1) {
    std::vector<double> busy(static_cast<size_t>(world_size));
    const double mine = stats.busy_fraction();
    MPI_Gather(&mine, 1, MPI_DOUBLE, busy.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (log) {
      std::fprintf(stderr, "[tpbatch] pipeline busy fraction per stage (replica 0):");
      for (int p = 0; p < topo.layout.pipeline; ++p)
        std::fprintf(stderr, " stage %d %.2f", p, busy[static_cast<size_t>(world_rank_of(topo.layout, RankCoords{0, p, 0}))]);
      std::fprintf(stderr, "\n");
    }
  }
  runner.reset();
  plane = ComputePlane{};  // before the MPI communicators it runs over
  topo = Topology{};
  return finish(exit_code);
}

}  // namespace tpbatch
