#pragma once
// What the backend tests share: host vectors into backend buffers and back, and seeded normal
// random inputs.
#include <cstdint>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace tpbatch::test {

// Host data in a backend buffer of `dtype` (the bytes as given: T must match it), and back as floats.
template <typename T>
Buffer put(Backend& be, const std::vector<T>& v, DType dtype = DType::F32) {
  Buffer b = be.alloc(v.size(), dtype);
  be.upload(b.view(), v.data(), v.size() * sizeof(T));
  return b;
}
inline std::vector<float> get(Backend& be, const Buffer& b) {
  std::vector<float> v(b.count());
  be.download(b.view(), v.data(), v.size() * sizeof(float));
  return v;
}

// n values from N(0, scale^2), the same for the same seed.
inline std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

}  // namespace tpbatch::test
