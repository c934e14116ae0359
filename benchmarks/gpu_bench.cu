// GPU micro-benchmark (CUDA builds only; run by scripts/gpu_check.sh on a GPU machine), all
// through the CUDA backend's Backend interface:
//   1. device copy bandwidth (cudaMemcpyAsync D2D timed by CUDA events, bytes read + written per second);
//   2. the GEMMs of a decode step of a Llama-3-8B-shaped model in bf16 (32 layers of qkv, o,
//      gate_up and down projections + the LM head) at batch 1, 16 and 64, against the HBM floor:
//      weight bytes / measured copy bandwidth;
//   3. a prefill-sized GEMM (4096 tokens x 14336 x 4096): bf16 and TF32 (F32 weights), TFLOP/s;
//   4. decode attention at batch 1 and 64 over a 4K context (32 q / 8 kv heads, head_dim 128,
//      bf16 cache), against the KV bytes it must read;
//   5. the same decode projections (no LM head) with quantized weights: bf16, fp8 with per-channel
//      scales, fp8 with 128-column block scales, 4-bit with zero points in groups of 128 and int8
//      W8A8 (x quantized per row), at batch 1 and 16, against their bytes (values + scales +
//      zeros) / copy bandwidth;
//   6. constrained rows' masks (mask_logits): 256 rows of a 128,256-token vocabulary.
// Prints a short table last. Usage: tpbatch_gpu_bench [layers (32)]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

using namespace tpbatch;
using Clock = std::chrono::steady_clock;

template <typename F>
static double time_it(Backend& be, F&& f, int iters) {  // mean seconds per call after one warm-up
  f();
  be.synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  be.synchronize();
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

// Seconds per device-to-device copy of `bytes`, timed by CUDA events around `iters` copies on a
// stream of its own after one warm-up. Not time_it: cudaMemcpy between device buffers returns
// before the copy is done and runs on the legacy stream, which the backend's non-blocking stream
// (what be.synchronize() waits for) is not ordered with, so the host clock would time the enqueue.
static double copy_seconds(void* dst, const void* src, size_t bytes, int iters) {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  TPBATCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  TPBATCH_CUDA_CHECK(cudaEventCreate(&start));
  TPBATCH_CUDA_CHECK(cudaEventCreate(&stop));
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  TPBATCH_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) TPBATCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  TPBATCH_CUDA_CHECK(cudaEventRecord(stop, stream));
  TPBATCH_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  TPBATCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return ms / 1e3 / iters;
}

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  const int layers = argc > 1 ? std::atoi(argv[1]) : 32;
  std::printf("device: %s; %s\n", cuda_device_description(0).c_str(), cuda_build_info().c_str());
  auto be = make_cuda_backend(0);

  // 1. Copy bandwidth.
  const size_t copy_bytes = size_t(2) << 30;
  double bw = 0;
  {
    Buffer a = be->alloc(copy_bytes / 2, DType::BF16), b = be->alloc(copy_bytes / 2, DType::BF16);
    be->synchronize();  // the buffers' zero fill, on the backend's stream, before the copies read them
    const size_t bytes = a.bytes();
    bw = 2.0 * bytes / copy_seconds(b.view().data, a.view().data, bytes, 10);  // read + write
  }
  std::printf("copy: %.0f GB/s (read+write)\n", bw / 1e9);

  // 2. Decode GEMMs over an 8B-shaped bf16 stack.
  const int64_t H = 4096, inter = 14336, qkv = 4096 + 2 * 1024, vocab = 128256;
  struct Proj { int64_t n, k; };
  const std::vector<Proj> projs = {{qkv, H}, {H, H}, {2 * inter, H}, {H, inter}};
  std::vector<Buffer> w;
  size_t weight_bytes = 0;
  for (int l = 0; l < layers; ++l)
    for (const Proj& p : projs) {
      w.push_back(be->alloc(size_t(p.n * p.k), DType::BF16));
      weight_bytes += w.back().bytes();
    }
  Buffer lm_head = be->alloc(size_t(vocab * H), DType::BF16);
  weight_bytes += lm_head.bytes();
  const int64_t max_batch = 64;
  Buffer x = be->alloc(max_batch * inter, DType::BF16), y = be->alloc(max_batch * 2 * inter, DType::BF16);
  Buffer logits = be->alloc(max_batch * vocab, DType::F32);
  const double floor_ms = weight_bytes / bw * 1e3;  // every weight byte read once at the measured HBM rate
  struct Row { int batch; double ms; };
  std::vector<Row> decode;
  for (int batch : {1, 16, 64}) {
    const double t = time_it(*be, [&] {
      size_t i = 0;
      for (int l = 0; l < layers; ++l)
        for (const Proj& p : projs) be->matmul_nt(x.view(), w[i++].view(), y.view(), batch, p.n, p.k);
      be->matmul_nt(x.view(), lm_head.view(), logits.view(), batch, vocab, H);
    }, 5);
    decode.push_back({batch, t * 1e3});
    std::printf("decode GEMMs batch %d: %.2f ms per step (%d layers + LM head, %.2f GB bf16 weights)\n", batch,
                t * 1e3, layers, weight_bytes / 1e9);
  }
  w.clear();
  lm_head = Buffer();

  // 3. Prefill-sized GEMM: bf16 weights, and F32 weights (TF32 tensor cores).
  const int64_t m = 4096, n = inter, k = H;
  const double flops = 2.0 * m * n * k;
  double t_bf16 = 0, t_tf32 = 0;
  {
    Buffer px = be->alloc(m * k, DType::BF16), pw = be->alloc(n * k, DType::BF16), py = be->alloc(m * n, DType::BF16);
    t_bf16 = time_it(*be, [&] { be->matmul_nt(px.view(), pw.view(), py.view(), m, n, k); }, 10);
    Buffer fx = be->alloc(m * k, DType::F32), fw = be->alloc(n * k, DType::F32), fy = be->alloc(m * n, DType::F32);
    t_tf32 = time_it(*be, [&] { be->matmul_nt(fx.view(), fw.view(), fy.view(), m, n, k); }, 5);
  }

  // 4. Decode attention over 4K contexts.
  struct AttnRow { int batch; double us; double gbps; };
  std::vector<AttnRow> attn;
  {
    const int64_t ctx = 4096, q_heads = 32, kv_heads = 8, hd = 128;
    KvLayout kv;
    kv.kv_heads = kv_heads, kv.block_size = 16, kv.head_dim = hd, kv.dtype = DType::BF16;
    kv.num_blocks = 64 * ctx / kv.block_size;
    Buffer kc = be->alloc(kv.elements_per_layer(), DType::BF16), vc = be->alloc(kv.elements_per_layer(), DType::BF16);
    const int64_t stride = (q_heads + 2 * kv_heads) * hd;
    Buffer qkv_buf = be->alloc(64 * stride, DType::BF16), out = be->alloc(64 * q_heads * hd, DType::BF16);
    for (int batch : {1, 64}) {
      std::vector<int32_t> blocks(batch * ctx / kv.block_size);
      std::iota(blocks.begin(), blocks.end(), 0);
      std::vector<AttentionSeq> seqs;
      std::vector<int32_t> tokens(batch, 0), positions(batch, int32_t(ctx - 1));
      for (int b = 0; b < batch; ++b)
        seqs.push_back({b, 1, ctx - 1, blocks.data() + b * ctx / kv.block_size, ctx / kv.block_size});
      StepBatch step;
      step.tokens = tokens;
      step.positions = positions;
      step.seqs = seqs;
      be->begin_step(step);
      const double t = time_it(*be, [&] {
        be->paged_attention(qkv_buf.view(), stride, qkv_buf.view(q_heads * hd), qkv_buf.view((q_heads + kv_heads) * hd),
                            stride, kc.view(), vc.view(), kv, q_heads, out.view());
      }, 20);
      const double kv_bytes = 2.0 * batch * ctx * kv_heads * hd * 2;
      attn.push_back({batch, t * 1e6, kv_bytes / t / 1e9});
    }
  }

  // 5. Quantized decode projections over the same 8B shapes (layers only: a checkpoint's LM head stays bf16).
  struct QuantRow { const char* name; int batch; double ms, floor_ms; };
  std::vector<QuantRow> quant;
  double mask_us = 0;
  const int64_t mask_rows = 256, mask_words = mask_words_per_row(vocab);
  try {  // a failure here still prints the table of 1-4
    struct Format { const char* name; DType values; int64_t group; };
    const std::vector<Format> formats = {{"bf16", DType::BF16, 0}, {"fp8 per-channel", DType::F8E4M3, -1},
                                         {"fp8 block 128", DType::F8E4M3, 128}, {"int4 group 128", DType::I4, 128},
                                         {"int8 W8A8 per-channel", DType::I8, -1}};
    for (const Format& f : formats) {
      std::vector<Buffer> values, scales, zeros;
      std::vector<ScaledWeightView> views;
      size_t bytes = 0;
      for (int l = 0; l < layers; ++l)
        for (const Proj& p : projs) {
          const int64_t group = f.group < 0 ? p.k : f.group, groups = f.group == 0 ? 1 : (p.k + group - 1) / group;
          const bool int4 = f.values == DType::I4;
          values.push_back(be->alloc(size_t(p.n * (int4 ? (p.k + 1) / 2 : p.k)), f.values));  // I4: in bytes
          bytes += values.back().bytes();
          ScaledWeightView v;
          v.values = values.back().view();
          if (f.group != 0) {
            scales.push_back(be->alloc(size_t(p.n * groups), DType::F32));
            bytes += scales.back().bytes();
            v.scales = scales.back().view(), v.groups = groups, v.group = group;
            if (int4) {
              zeros.push_back(be->alloc(size_t(p.n * groups), DType::F32));
              bytes += zeros.back().bytes();
              v.zeros = zeros.back().view();
            }
          }
          views.push_back(v);
        }
      for (int batch : {1, 16}) {
        const double t = time_it(*be, [&] {
          size_t i = 0;
          for (int l = 0; l < layers; ++l)
            for (const Proj& p : projs) {
              if (f.group == 0) be->matmul_nt(x.view(), views[i].values, y.view(), batch, p.n, p.k);
              else be->matmul_nt_scaled(x.view(), views[i], y.view(), batch, p.n, p.k);
              ++i;
            }
        }, 5);
        quant.push_back({f.name, batch, t * 1e3, bytes / bw * 1e3});
      }
    }

    // 6. Masks of constrained rows over a 128,256-token vocabulary.
    Buffer ml = be->alloc(size_t(mask_rows * vocab), DType::F32), mb = be->alloc(size_t(mask_rows * mask_words), DType::I64);
    mask_us = time_it(*be, [&] { be->mask_logits(ml.view(), mask_rows, vocab, mb.view()); }, 50) * 1e6;
  } catch (const std::exception& e) {
    std::printf("quantized projections / mask_logits: %s\n", e.what());
  }

  std::printf("\n%-40s %14s %14s\n", "measurement", "value", "reference");
  std::printf("%-40s %9.0f GB/s %14s\n", "copy bandwidth (read+write)", bw / 1e9, "HBM3e 4800");
  for (const Row& r : decode)
    std::printf("decode GEMMs batch %-3d (ms)              %14.2f %11.2f ms  (%.0f%% of floor)\n", r.batch, r.ms,
                floor_ms, 100.0 * floor_ms / r.ms);
  std::printf("%-40s %9.1f TF/s %14s\n", "prefill GEMM bf16 (4096x14336x4096)", flops / t_bf16 / 1e12, "bf16 ~990");
  std::printf("%-40s %9.1f TF/s %14s\n", "prefill GEMM tf32 (F32 weights)", flops / t_tf32 / 1e12, "tf32 ~495");
  for (const AttnRow& a : attn)
    std::printf("decode attention batch %-3d ctx 4096 (us) %14.1f %9.0f GB/s KV\n", a.batch, a.us, a.gbps);
  double bf16_ms[2] = {0, 0};
  for (const QuantRow& q : quant) {
    if (std::string(q.name) == "bf16") bf16_ms[q.batch == 1 ? 0 : 1] = q.ms;
    std::printf("decode projections %-15s batch %-3d (ms) %8.2f %8.2f ms floor (%.0f%% of floor), %.2fx bf16\n", q.name,
                q.batch, q.ms, q.floor_ms, 100.0 * q.floor_ms / q.ms, bf16_ms[q.batch == 1 ? 0 : 1] / q.ms);
  }
  if (mask_us > 0)
    std::printf("mask_logits %lld rows x %lld vocab (us)   %14.1f %9.0f GB/s logits read+write\n", (long long)mask_rows,
              (long long)vocab, mask_us, 2.0 * 4 * mask_rows * vocab / (mask_us * 1e-6) / 1e9);
  return 0;
}
