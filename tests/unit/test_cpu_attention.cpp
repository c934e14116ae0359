// The tiled (flash-style) CPU paged attention against the plain per-(row, head) reference loop on the
// same inputs: head dims 64 / 128, GQA groups 1 / 4 / 8, contexts 1..2048, several sequences with mixed
// chunk lengths in one step (prefill chunks and decode rows together), shuffled block tables, sliding
// windows, softcap, F32 and BF16 caches, block sizes the fixed-shape kernels do not cover.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "backend/cpu/attention/paged_attention.h"
#include "backend/cpu/attention/decode_attention_tile.h"
#include "backend/dtype.h"

namespace tpbatch::cpu {
namespace {

struct SeqShape {
  int64_t context;  // positions already in the cache
  int64_t rows;     // this step's rows (a prefill chunk, or 1 for decode)
};

struct Case {
  int64_t head_dim = 64, kv_heads = 2, group = 4, block_size = 16, window = 0;
  float softcap = 0.0f;
  DType dtype = DType::F32;
  std::vector<SeqShape> seqs;
};

// Runs both implementations on identical caches and inputs; the outputs agree within fp32
// reassociation and the caches written are identical.
void check(const Case& c) {
  const int64_t hd = c.head_dim, kvh = c.kv_heads, qh = kvh * c.group, bs = c.block_size;
  std::mt19937 rng(static_cast<uint32_t>(hd * 131 + qh * 17 + bs + c.window));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  int64_t total_blocks = 0, rows = 0;
  for (const auto& s : c.seqs) {
    total_blocks += (s.context + s.rows + bs - 1) / bs;
    rows += s.rows;
  }
  KvLayout kv{total_blocks + 3, kvh, bs, hd, c.window, c.dtype};
  kv.softcap = c.softcap;
  // Shuffled block tables: sequence i's blocks are scattered over the whole pool.
  std::vector<int32_t> pool(static_cast<size_t>(kv.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<AttentionSeq> seqs;
  int64_t next_block = 0, row = 0;
  for (const auto& s : c.seqs) {
    const int64_t nb = (s.context + s.rows + bs - 1) / bs;
    seqs.push_back({row, s.rows, s.context, pool.data() + next_block, nb});
    next_block += nb;
    row += s.rows;
  }
  // Cache contents before the step (random everywhere: positions past a sequence's end must be ignored).
  const size_t elems = kv.elements_per_layer();
  const size_t esize = c.dtype == DType::F32 ? 4 : 2;
  std::vector<uint8_t> k0(elems * esize), v0(elems * esize);
  for (size_t i = 0; i < elems; ++i) {
    const float a = uni(rng), b = uni(rng);
    if (c.dtype == DType::F32) {
      reinterpret_cast<float*>(k0.data())[i] = a;
      reinterpret_cast<float*>(v0.data())[i] = b;
    } else {
      reinterpret_cast<uint16_t*>(k0.data())[i] = f32_to_bf16(a);
      reinterpret_cast<uint16_t*>(v0.data())[i] = f32_to_bf16(b);
    }
  }
  // Fused-qkv-like strides: q rows wider than the heads they hold.
  const int64_t q_stride = qh * hd + 8, kv_stride = kvh * hd + 4;
  std::vector<float> q(rows * q_stride), k(rows * kv_stride), v(rows * kv_stride);
  for (auto* vec : {&q, &k, &v})
    for (auto& x : *vec) x = 2.0f * uni(rng);
  auto kr = k0, vr = v0, kt = k0, vt = v0;
  std::vector<float> out_ref(rows * qh * hd, NAN), out_new(rows * qh * hd, NAN);
  paged_attention_reference(q.data(), q_stride, k.data(), v.data(), kv_stride, kr.data(), vr.data(), kv, qh,
                            seqs.data(), static_cast<int64_t>(seqs.size()), out_ref.data());
  paged_attention(q.data(), q_stride, k.data(), v.data(), kv_stride, kt.data(), vt.data(), kv, qh, seqs.data(),
                  static_cast<int64_t>(seqs.size()), out_new.data());
  ASSERT_EQ(kr, kt) << "the caches written differ";
  for (size_t i = 0; i < out_ref.size(); ++i)
    ASSERT_NEAR(out_new[i], out_ref[i], 2e-5 * (1.0 + std::fabs(out_ref[i])))
        << "element " << i << " (row " << i / (qh * hd) << ", head " << (i / hd) % qh << ")";
}

// Prefill chunks, decode rows and a context reaching 2048 in one step.
const std::vector<SeqShape> kMixed = {{0, 37}, {100, 1}, {2047, 1}, {500, 64}, {0, 1}, {1984, 64}, {15, 17}, {31, 2}};
// A smaller step for the many window sizes and the bf16 cache (the reference widens bf16 slowly).
const std::vector<SeqShape> kBf16 = {{0, 37}, {2047, 1}, {500, 16}, {15, 17}, {63, 1}};
const std::vector<SeqShape> kWindowed = {{0, 37}, {100, 1}, {700, 1}, {290, 40}, {15, 17}};

class TiledAttention : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(TiledAttention, EqualsTheReferenceOnMixedChunks) {
  const auto [hd, group] = GetParam();
  check({.head_dim = hd, .kv_heads = 2, .group = group, .seqs = kMixed});
}

TEST_P(TiledAttention, EqualsTheReferenceOverABf16Cache) {
  const auto [hd, group] = GetParam();
  check({.head_dim = hd, .kv_heads = 2, .group = group, .dtype = DType::BF16, .seqs = kBf16});
}

INSTANTIATE_TEST_SUITE_P(HeadDimAndGqaGroup, TiledAttention,
                         ::testing::Combine(::testing::Values<int64_t>(64, 128), ::testing::Values<int64_t>(1, 4, 8)));

TEST(TiledAttentionWindow, HonoursSlidingWindowsShorterAndLongerThanAChunkOrBlock) {
  for (int64_t window : {1, 5, 16, 64, 300, 4096}) {
    SCOPED_TRACE(window);
    check({.head_dim = 64, .kv_heads = 4, .group = 3, .window = window, .seqs = kWindowed});
    check({.head_dim = 128, .kv_heads = 1, .group = 8, .window = window, .dtype = DType::BF16, .seqs = kWindowed});
  }
}

TEST(TiledAttentionDecode, DecodeBatchOfManySequencesAtMixedContexts) {
  std::vector<SeqShape> decode;
  for (int64_t i = 0; i < 32; ++i) decode.push_back({(i * 67) % 2048, 1});
  check({.head_dim = 64, .kv_heads = 4, .group = 3, .seqs = decode});
  check({.head_dim = 128, .kv_heads = 2, .group = 4, .dtype = DType::BF16, .seqs = decode});
}

TEST(TiledAttentionShapes, BlockSizesAndHeadDimsOutsideTheFixedKernels) {
  for (int64_t bs : {1, 4, 32}) {
    SCOPED_TRACE(bs);
    check({.head_dim = 64, .kv_heads = 2, .group = 4, .block_size = bs, .seqs = {{0, 37}, {50, 1}, {300, 20}}});
  }
  check({.head_dim = 8, .kv_heads = 2, .group = 2, .block_size = 16, .window = 7, .seqs = {{0, 37}, {9, 3}}});
  check({.head_dim = 96, .kv_heads = 1, .group = 5, .block_size = 16, .dtype = DType::BF16, .seqs = {{20, 40}}});
}

TEST(TiledAttentionShapes, SoftcapIsAppliedBeforeTheSoftmax) {
  check({.head_dim = 64, .kv_heads = 2, .group = 2, .softcap = 0.5f, .seqs = {{0, 30}, {200, 1}}});
  check({.head_dim = 64, .kv_heads = 2, .group = 2, .window = 9, .softcap = 2.0f, .dtype = DType::BF16,
         .seqs = {{0, 30}, {200, 1}}});
}

// ---- decode-shaped tiles (rows x group <= detail::kDecodeTileMaxQueries: the AVX2 decode kernel where
// the CPU has it) ----

// While alive, every tile takes the portable kernel (so it stays tested on AVX2 machines).
struct PortableKernelOnly {
  PortableKernelOnly() { detail::set_decode_kernel_enabled(false); }
  ~PortableKernelOnly() { detail::set_decode_kernel_enabled(true); }
};

// 1..5 rows per sequence; the first row sees 1, 15, 16, 17 and 1000 positions (a block boundary either
// side, and a long context over many chunks of the online softmax).
std::vector<SeqShape> decode_step(int64_t rows) {
  return {{0, rows}, {14, rows}, {15, rows}, {16, rows}, {999, rows}};
}

class DecodeAttention : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

// Sets the team size while alive. One thread: every decode tile takes all kv heads; four threads and the
// 5 sequences of decode_step: one kv head per tile (paged_attention.cpp's choice).
struct Threads {
  int saved = omp_get_max_threads();
  explicit Threads(int n) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
};

TEST_P(DecodeAttention, EqualsTheReferenceForF32AndBf16Caches) {
  const auto [hd, group, bs] = GetParam();
  for (int64_t rows = 1; rows <= 5; ++rows) {
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    Threads team(rows % 2 == 1 ? 1 : 4);  // both tile shapes, each over F32 and BF16
    check({.head_dim = hd, .kv_heads = 2, .group = group, .block_size = bs, .seqs = decode_step(rows)});
    check({.head_dim = hd, .kv_heads = 2, .group = group, .block_size = bs, .dtype = DType::BF16,
           .seqs = decode_step(rows)});
  }
}

// Head dims 64, 128 and 36 (not a multiple of 8: the scalar tails); GQA groups 1, 3, 4, 8; block sizes
// 16 and 7 (positions not in fours, chunks not of 64).
INSTANTIATE_TEST_SUITE_P(HeadDimGroupBlock, DecodeAttention,
                         ::testing::Combine(::testing::Values<int64_t>(64, 128, 36),
                                            ::testing::Values<int64_t>(1, 3, 4, 8),
                                            ::testing::Values<int64_t>(16, 7)));

TEST(DecodeAttentionWindow, HonoursSlidingWindowsAndSoftcap) {
  for (int64_t window : {1, 5, 16, 17, 300}) {
    SCOPED_TRACE(window);
    for (int64_t rows : {1, 2, 5}) {
      Threads team(rows == 2 ? 4 : 1);
      check({.head_dim = 64, .kv_heads = 4, .group = 3, .window = window, .seqs = decode_step(rows)});
      check({.head_dim = 128, .kv_heads = 1, .group = 4, .block_size = 7, .window = window, .dtype = DType::BF16,
             .seqs = decode_step(rows)});
    }
  }
  check({.head_dim = 64, .kv_heads = 2, .group = 3, .softcap = 0.5f, .seqs = decode_step(1)});
  check({.head_dim = 64, .kv_heads = 2, .group = 1, .window = 9, .softcap = 2.0f, .dtype = DType::BF16,
         .seqs = decode_step(3)});
}

TEST(DecodeAttentionPortable, ThePortableKernelStillEqualsTheReferenceOnDecodeTiles) {
  PortableKernelOnly portable;
  for (int64_t rows : {1, 2}) {
    check({.head_dim = 64, .kv_heads = 4, .group = 3, .seqs = decode_step(rows)});
    check({.head_dim = 36, .kv_heads = 2, .group = 4, .block_size = 7, .window = 17, .dtype = DType::BF16,
           .seqs = decode_step(rows)});
  }
}

TEST(TiledAttentionErrors, QHeadsNotAMultipleOfKvHeadsIsAClearError) {
  KvLayout kv{4, 3, 16, 8, 0, DType::F32};
  std::vector<float> buf(kv.elements_per_layer()), q(64), out(64);
  std::vector<int32_t> blocks = {0};
  AttentionSeq s{0, 1, 0, blocks.data(), 1};
  try {
    paged_attention(q.data(), 32, q.data(), q.data(), 24, buf.data(), buf.data(), kv, 4, &s, 1, out.data());
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("4 q heads are not a multiple of 3 kv heads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpbatch::cpu
