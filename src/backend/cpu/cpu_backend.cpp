// The CPU backend: the GEMM kernels of gemm.h, everything else plain loops. It is also the
// reference every CUDA kernel is tested against, so it stays simple. Activations are F32.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention/paged_attention.h"
#include "backend/cpu/cpu_exp_ops.h"
#include "backend/cpu/cpu_family_ops.h"
#include "backend/cpu/cpu_moe_ops.h"
#include "backend/cpu/gemm/gemm.h"
#include "backend/cpu/host_memory.h"
#include "common/error.h"
#include "common/mem_available.h"

namespace tpbatch {
namespace {

const float* f32(BufferView v, const char* what) {
  if (v.dtype != DType::F32) throw Error(std::string("CPU backend: ") + what + " must be F32, got " + dtype_name(v.dtype));
  return v.as<const float>();
}
float* f32_mut(BufferView v, const char* what) { return const_cast<float*>(f32(v, what)); }

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(bool checked) : mem_(checked) {}

  std::string name() const override { return mem_.checked() ? "cpu (checked)" : "cpu"; }
  DType activation_dtype() const override { return DType::F32; }

  Buffer alloc(size_t count, DType dtype) override {
    return Buffer(this, mem_.allocate(count * dtype_size(dtype)), count, dtype);
  }
  void upload(BufferView dst, const void* src, size_t bytes) override {
    Access a(mem_);
    std::memcpy(dst.data, src, bytes);
  }
  void download(BufferView src, void* dst, size_t bytes) override {
    Access a(mem_);
    std::memcpy(dst, src.data, bytes);
  }
  void synchronize() override {}
  void host_access(BufferView view, size_t, bool, const std::function<void(void*)>& fn) override {
    Access a(mem_);
    fn(view.data);
  }
  size_t memory_available() const override { return static_cast<size_t>(mem_available_bytes()); }

  void begin_step(const StepBatch& s) override {
    tokens_.assign(s.tokens.begin(), s.tokens.end());
    positions_.assign(s.positions.begin(), s.positions.end());
    rope_tables_.assign(s.rope_tables.begin(), s.rope_tables.end());
    logit_rows_.assign(s.logit_rows.begin(), s.logit_rows.end());
    targets_.assign(s.logit_targets.begin(), s.logit_targets.end());
    // The sequences' block tables are copied too: the caller's memory need not outlive the call.
    seqs_.assign(s.seqs.begin(), s.seqs.end());
    size_t nb = 0;
    for (const auto& q : seqs_) nb += static_cast<size_t>(q.num_blocks);
    blocks_.resize(nb);
    size_t at = 0;
    for (auto& q : seqs_) {
      std::copy_n(q.blocks, q.num_blocks, blocks_.data() + at);
      q.blocks = blocks_.data() + at;
      at += static_cast<size_t>(q.num_blocks);
    }
  }

  void matmul_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k) override {
    Access a(mem_);
    if (m == 0 || n == 0) return;
    cpu::gemm_nt(f32(x, "matmul input"), w.data, w.dtype, f32_mut(y, "matmul output"), m, n, k);
  }

  bool runs_quantized_weights(DType values) const override {
    return values == DType::F8E4M3 || values == DType::I4 || values == DType::I8;
  }

  void matmul_nt_scaled(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n,
                        int64_t k) override {
    Access a(mem_);
    if (m == 0 || n == 0) return;
    if (w.values.dtype == DType::I8) {
      // One scale per output row (per channel or per tensor, model/quantization.h).
      if (w.scales.dtype != DType::F32 || w.groups != 1)
        throw Error("matmul_nt_scaled: I8 weights need one F32 scale per output row, got " +
                    std::to_string(w.groups) + " " + dtype_name(w.scales.dtype) + " scales a row");
      cpu::gemm_nt_int8(f32(x, "matmul input"), w.values.as<const int8_t>(), w.scales.as<const float>(),
                        f32_mut(y, "matmul output"), m, n, k,
                        w.input_amax.empty() ? nullptr : f32(w.input_amax, "matmul input_amax"));
      return;
    }
    const bool int4 = w.values.dtype == DType::I4;
    if ((w.values.dtype != DType::F8E4M3 && !int4) || w.scales.dtype != DType::F32 ||
        (int4 && (w.zeros.empty() || w.zeros.dtype != DType::F32)))
      throw Error(std::string("matmul_nt_scaled: weights must be F8_E4M3 or I8 with F32 scales or I4 with F32 "
                              "scales and zeros, got ") + dtype_name(w.values.dtype) + " with " + dtype_name(w.scales.dtype));
    const cpu::GemmScales s{w.scales.as<const float>(), w.groups, w.group, w.phase,
                            int4 ? w.zeros.as<const float>() : nullptr};
    if (int4)
      cpu::gemm_nt_int4(f32(x, "matmul input"), w.values.as<const uint8_t>(), s, f32_mut(y, "matmul output"), m, n, k);
    else
      cpu::gemm_nt_scaled(f32(x, "matmul input"), w.values.as<const uint8_t>(), s, f32_mut(y, "matmul output"), m, n, k);
  }

  void int8_row_amax(BufferView x, BufferView amax, int64_t m, int64_t k) override {
    Access a(mem_);
    cpu::int8_row_amax(f32(x, "int8_row_amax input"), m, k, f32_mut(amax, "int8_row_amax output"));
  }

  void add_bias(BufferView xv, BufferView bv, int64_t m, int64_t n) override {
    Access a(mem_);
    float* x = f32_mut(xv, "add_bias x");
    const float* bias = f32(bv, "bias");
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) x[i * n + j] += bias[j];
  }

  void add(BufferView xv, BufferView yv, size_t count) override {
    Access a(mem_);
    float* x = f32_mut(xv, "add x");
    const float* y = f32(yv, "add y");
    for (size_t i = 0; i < count; ++i) x[i] += y[i];
  }

  void rmsnorm(BufferView xv, BufferView wv, BufferView outv, int64_t m, int64_t n, float eps) override {
    Access a(mem_);
    rmsnorm_rows(f32(xv, "rmsnorm x"), f32(wv, "norm weight"), f32_mut(outv, "rmsnorm out"), m, n, eps);
  }

  void add_rmsnorm(BufferView xv, BufferView rv, BufferView wv, BufferView outv, int64_t m, int64_t n,
                   float eps) override {
    Access a(mem_);
    float* x = f32_mut(xv, "add_rmsnorm x");
    const float* r = f32(rv, "residual");
    for (int64_t i = 0; i < m * n; ++i) x[i] += r[i];
    rmsnorm_rows(x, f32(wv, "norm weight"), f32_mut(outv, "rmsnorm out"), m, n, eps);
  }

  void rope(BufferView xv, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView inv_freq_v) override {
    Access a(mem_);
    float* x = f32_mut(xv, "rope x");
    const float* inv_freq = f32(inv_freq_v, "rope frequencies");
    const int64_t half = head_dim / 2, rows = static_cast<int64_t>(positions_.size());
    std::vector<float> cs(half), sn(half);
    for (int64_t r = 0; r < rows; ++r) {
      const float* table = inv_freq + (rope_tables_.empty() ? 0 : rope_tables_[r] * half);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions_[r]) * table[i];
        cs[i] = static_cast<float>(std::cos(angle));
        sn[i] = static_cast<float>(std::sin(angle));
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + r * row_stride + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float p = v[i], q = v[i + half];
          v[i] = p * cs[i] - q * sn[i];
          v[i + half] = q * cs[i] + p * sn[i];
        }
      }
    }
  }

  void silu_mul(BufferView guv, BufferView outv, int64_t m, int64_t inter) override {
    Access a(mem_);
    const float* gu = f32(guv, "silu_mul input");
    float* out = f32_mut(outv, "silu_mul out");
    cpu::silu_mul(gu, out, m, inter);
  }

  void paged_attention(BufferView q, int64_t q_stride, BufferView k, BufferView v, int64_t kv_stride,
                       BufferView k_cache, BufferView v_cache, const KvLayout& kv, int64_t q_heads,
                       BufferView out) override {
    Access a(mem_);
    if (k_cache.dtype != kv.dtype || v_cache.dtype != kv.dtype) throw Error("CPU backend: KV cache dtype mismatch");
    cpu::paged_attention(f32(q, "q"), q_stride, f32(k, "k"), f32(v, "v"), kv_stride, k_cache.data, v_cache.data, kv,
                         q_heads, seqs_.data(), static_cast<int64_t>(seqs_.size()), f32_mut(out, "attention out"));
  }

  void embedding(BufferView table, int64_t vocab_begin, int64_t vocab_end, int64_t dim, BufferView outv) override {
    Access a(mem_);
    float* out = f32_mut(outv, "embedding out");
    const auto* base = static_cast<const char*>(table.data);
    const size_t es = dtype_size(table.dtype);
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const int64_t id = tokens_[i];
      float* o = out + static_cast<int64_t>(i) * dim;
      if (id < vocab_begin || id >= vocab_end) {
        std::memset(o, 0, dim * sizeof(float));
        continue;
      }
      const char* row = base + static_cast<size_t>((id - vocab_begin) * dim) * es;
      widen_row(row, table.dtype, o, dim);
    }
  }

  void gather_logit_rows(BufferView x, int64_t dim, int64_t first, int64_t count, BufferView out) override {
    copy_rows(x, dim, std::span<const int64_t>(logit_rows_).subspan(first, count), dim, out, dim);
  }

  void copy_rows(BufferView src, int64_t src_stride, std::span<const int64_t> rows, int64_t width, BufferView dst,
                 int64_t dst_stride) override {
    Access a(mem_);
    const size_t es = dtype_size(src.dtype);
    for (size_t i = 0; i < rows.size(); ++i)
      std::memcpy(dst.at(static_cast<int64_t>(i) * dst_stride).data, src.at(rows[i] * src_stride).data, width * es);
  }

  void mask_logits(BufferView logits_v, int64_t rows, int64_t vn, BufferView bits_v) override {
    Access a(mem_);
    float* logits = f32_mut(logits_v, "mask_logits logits");
    if (bits_v.dtype != DType::I64)
      throw Error(std::string("CPU backend: mask_logits: bits of dtype ") + dtype_name(bits_v.dtype) + " (I64 words)");
    const auto* bits = bits_v.as<uint64_t>();
    const int64_t words = mask_words_per_row(vn);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < words; ++k) {
        const uint64_t w = bits[i * words + k];
        if (w == ~uint64_t{0}) continue;  // a constraint's masks are mostly whole words in or out
        float* row = logits + i * vn + k * 64;
        for (int64_t j = 0; j < std::min<int64_t>(64, vn - k * 64); ++j)
          if (((w >> j) & 1u) == 0) row[j] = -std::numeric_limits<float>::infinity();
      }
  }

  void logit_stats(BufferView logits_v, int64_t count, int64_t vn, int64_t v0, int64_t first,
                   BufferView stats_v) override {
    Access a(mem_);
    const float* logits = f32(logits_v, "logits");
    auto* stats = stats_v.as<LogitStats>();
#pragma omp parallel for if (count > 1)
    for (int64_t i = 0; i < count; ++i) {
      const float* row = logits + i * vn;
      LogitStats st{-std::numeric_limits<float>::infinity(), 0, 0.0f, std::numeric_limits<float>::quiet_NaN()};
      for (int64_t j = 0; j < vn; ++j)
        if (row[j] > st.max_logit) st.max_logit = row[j], st.argmax = static_cast<int32_t>(v0 + j);
      st.sum_exp = static_cast<float>(cpu::sum_exp_shifted(row, vn, st.max_logit));
      const int32_t target = targets_[static_cast<size_t>(first + i)];
      if (target >= v0 && target < v0 + vn) st.target_logit = row[target - v0];
      stats[i] = st;
    }
  }

  // The host's sampler over the rows in place: what the engine did with downloaded rows before,
  // on the same threads (rows are independent; the draw is keyed by its counters, not the thread).
  void sample_rows(BufferView logits_v, int64_t vocab, std::span<const int64_t> rows, std::span<const DrawParams> params,
                   std::span<const float> row_max, const HostDraw& host_draw, std::span<DrawnToken> out) override {
    if (params.size() != rows.size() || row_max.size() != rows.size() || out.size() != rows.size())
      throw Error("CPU backend: sample_rows: rows, params, row maxima and outputs differ in count");
    Access a(mem_);
    const float* logits = f32(logits_v, "logits");
    const int64_t n = static_cast<int64_t>(rows.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits + rows[i] * vocab;
      const int32_t t = host_draw(row, vocab, params[i], row_max[i]);
      out[i] = DrawnToken{t, row[t]};
    }
  }

  void rmsnorm_heads(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView w,
                     float eps) override {
    Access a(mem_);
    cpu::rmsnorm_heads(f32_mut(x, "rmsnorm_heads x"), rows, row_stride, heads, head_dim, f32(w, "norm weight"), eps);
  }
  void gelu_tanh_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) override {
    Access a(mem_);
    cpu::gelu_tanh_mul(f32(gu, "gelu_tanh_mul input"), f32_mut(out, "gelu_tanh_mul out"), m, inter);
  }
  void scale(BufferView x, size_t count, float factor) override {
    Access a(mem_);
    cpu::scale(f32_mut(x, "scale x"), count, factor);
  }
  void weighted_row_sum(BufferView src, std::span<const int64_t> rows, std::span<const float> weights, int64_t k,
                        int64_t width, BufferView out) override {
    Access a(mem_);
    cpu::weighted_row_sum(f32(src, "weighted_row_sum src"), rows, weights, k, width, f32_mut(out, "weighted_row_sum out"));
  }
  void softcap(BufferView x, size_t count, float cap) override {
    Access a(mem_);
    cpu::softcap(f32_mut(x, "softcap x"), count, cap);
  }

 protected:
  void release(void* data, size_t bytes) noexcept override { mem_.release(data, bytes); }

 private:
  using Access = HostMemory::AccessScope;

  static void rmsnorm_rows(const float* x, const float* w, float* out, int64_t m, int64_t n, float eps) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * n;
      float* oi = out + i * n;
      double ss = 0.0;
      for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(xi[j]) * xi[j];
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
      for (int64_t j = 0; j < n; ++j) oi[j] = xi[j] * scale * w[j];
    }
  }

  static void widen_row(const char* row, DType dtype, float* out, int64_t n) {
    switch (dtype) {
      case DType::F32: std::memcpy(out, row, n * sizeof(float)); return;
      case DType::BF16:
      case DType::F16: {
        const bool bf = dtype == DType::BF16;
        for (int64_t j = 0; j < n; ++j) {
          uint16_t h;
          std::memcpy(&h, row + 2 * j, 2);
          out[j] = bf ? bf16_to_f32(h) : f16_to_f32(h);
        }
        return;
      }
      default: throw Error("CPU backend: an embedding table must be F32, BF16 or F16");
    }
  }

  HostMemory mem_;
  std::vector<int32_t> tokens_, positions_, rope_tables_, targets_, blocks_;
  std::vector<int64_t> logit_rows_;
  std::vector<AttentionSeq> seqs_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(CpuBackendOptions options) {
  const char* env = std::getenv("TPBATCH_CHECKED_BACKEND");
  if (env && *env && std::string(env) != "0") options.checked = true;
  return std::make_unique<CpuBackend>(options.checked);
}

}  // namespace tpbatch
