#pragma once
// What the CUDA-vs-CPU tests of tests/gpu share: the CudaVsCpu fixture (both backends, a seeded
// generator, the relative error each test records) and host <-> buffer helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace tpbatch::gpu_test {

using Vec = std::vector<float>;

// The emulated device (cuemu/) runs a kernel thousands of times slower than a GPU: there the long
// cases take the same paths at a quarter of the size (still many KV blocks and tiles per query tile).
inline bool emulated_device() { return cuda_device_description(0).find("emulated") != std::string::npos; }

inline double rel_err(const Vec& out, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Rounded to t; F16 values are rounded to bf16 first, so that they are exact in both 16-bit types
// (the GPU converts bf16 activations to f16 for f16 weights).
inline float round_to(DType t, float v) {
  if (t == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::F16) return f16_to_f32(f32_to_f16(bf16_to_f32(f32_to_bf16(v))));
  return v;
}

// Host values -> a buffer of `dtype` on `b` (converted on the host).
inline Buffer put(Backend& b, const Vec& v, DType dtype) {
  Buffer buf = b.alloc(v.size(), dtype);
  if (dtype == DType::F32) {
    b.upload(buf.view(), v.data(), v.size() * sizeof(float));
  } else {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = dtype == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
    b.upload(buf.view(), h.data(), h.size() * 2);
  }
  return buf;
}

// `count` elements of a buffer (F32/BF16/F16) -> host floats.
inline Vec get(Backend& b, BufferView view, size_t count) {
  Vec out(count);
  if (view.dtype == DType::F32) {
    b.download(view, out.data(), count * sizeof(float));
  } else {
    std::vector<uint16_t> h(count);
    b.download(view, h.data(), count * 2);
    for (size_t i = 0; i < count; ++i) out[i] = view.dtype == DType::BF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
  }
  return out;
}
inline Vec get(Backend& b, const Buffer& buf) { return get(b, buf.view(), buf.count()); }

inline std::vector<uint8_t> raw(Backend& b, const Buffer& buf) {
  std::vector<uint8_t> out(buf.bytes());
  b.download(buf.view(), out.data(), out.size());
  return out;
}

class CudaVsCpu : public ::testing::Test {
 public:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    gpu_ = make_cuda_backend(0);
    cpu_ = make_cpu_backend();
    const unsigned seed = std::random_device{}();
    RecordProperty("seed", static_cast<int>(seed));
    std::printf("seed %u\n", seed);
    rng_.seed(seed);
  }
  // Uniform in [lo, hi), rounded to `exact` so that every backend sees the same values.
  Vec random(size_t n, float lo = -1.0f, float hi = 1.0f, DType exact = DType::BF16) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(n);
    for (auto& x : v) x = round_to(exact, d(rng_));
    return v;
  }
  // Every CUDA-vs-CPU comparison goes through rel(): the test's largest relative error is
  // recorded in the XML report (property max_rel_err), pass or fail, for the GPU check's table.
  double rel(const Vec& got, const Vec& ref) {
    const double e = rel_err(got, ref);
    max_rel_err_ = std::max(max_rel_err_, e);
    return e;
  }
  void TearDown() override {
    if (max_rel_err_ < 0) return;  // skipped, or compared nothing
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", max_rel_err_);
    RecordProperty("max_rel_err", text);
  }
  DType act() const { return gpu_->activation_dtype(); }
  // Both backends' activation buffers holding v.
  std::pair<Buffer, Buffer> both(const Vec& v) { return {put(*cpu_, v, DType::F32), put(*gpu_, v, act())}; }
  std::pair<Buffer, Buffer> both_zero(size_t n) { return {cpu_->alloc(n, DType::F32), gpu_->alloc(n, act())}; }
  void begin_both(const StepBatch& s) {
    cpu_->begin_step(s);
    gpu_->begin_step(s);
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::mt19937 rng_;

 private:
  double max_rel_err_ = -1;
};

}  // namespace tpbatch::gpu_test
