// Tests of the independent reference model (tests/reference/), checked against
// things that do not depend on it: a port of llama2.c's run.c forward pass on the
// original llama2.c checkpoint, llama2.c's own expected output, and algebraic
// identities on small synthetic models.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "reference_llama.h"
#include "test_assets.h"

namespace {

namespace fs = std::filesystem;

const std::string kHfDir = tpbatch::test::stories_dir().string();
const std::string kLlama2cDir = tpbatch::test::stories_llama2c_dir().string();

// ---- a port of llama2.c run.c's forward pass, in double -------------------------------
// Reads the legacy llama2.c checkpoint directly; rotates ADJACENT pairs like run.c.
class Llama2c {
 public:
  explicit Llama2c(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    int32_t header[7];
    in.read(reinterpret_cast<char*>(header), sizeof header);
    dim = header[0];
    hidden_dim = header[1];
    n_layers = header[2];
    n_heads = header[3];
    n_kv_heads = header[4];
    const bool shared = header[5] > 0;
    vocab_size = std::abs(header[5]);
    seq_len = header[6];
    head_size = dim / n_heads;
    const int kv_dim = n_kv_heads * head_size;

    auto read = [&](size_t count) {
      std::vector<float> f(count);
      in.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(count * sizeof(float)));
      if (!in) throw std::runtime_error("short read in " + path);
      return std::vector<double>(f.begin(), f.end());
    };
    const size_t L = n_layers;
    token_embedding = read(size_t(vocab_size) * dim);
    rms_att = read(L * dim);
    wq = read(L * dim * dim);
    wk = read(L * kv_dim * dim);
    wv = read(L * kv_dim * dim);
    wo = read(L * dim * dim);
    rms_ffn = read(L * dim);
    w1 = read(L * hidden_dim * dim);
    w2 = read(L * dim * hidden_dim);
    w3 = read(L * hidden_dim * dim);
    rms_final = read(dim);
    read(size_t(seq_len) * head_size / 2);  // freq_cis_real (unused)
    read(size_t(seq_len) * head_size / 2);  // freq_cis_imag (unused)
    wcls = shared ? token_embedding : read(size_t(vocab_size) * dim);
    key_cache.assign(L * seq_len * kv_dim, 0.0);
    value_cache.assign(L * seq_len * kv_dim, 0.0);
  }

  // run.c forward(): one token at position pos, returns the logits.
  std::vector<double> forward(int token, int pos) {
    const int kv_dim = n_kv_heads * head_size;
    const int kv_mul = n_heads / n_kv_heads;
    std::vector<double> x(token_embedding.begin() + size_t(token) * dim,
                          token_embedding.begin() + size_t(token + 1) * dim);
    std::vector<double> xb(dim), xb2(dim), hb(hidden_dim), hb2(hidden_dim), q(dim);
    std::vector<double> att(seq_len);
    for (int l = 0; l < n_layers; ++l) {
      rmsnorm(xb, x, &rms_att[size_t(l) * dim]);
      double* k = &key_cache[(size_t(l) * seq_len + pos) * kv_dim];
      double* v = &value_cache[(size_t(l) * seq_len + pos) * kv_dim];
      matmul(q.data(), xb.data(), &wq[size_t(l) * dim * dim], dim, dim);
      matmul(k, xb.data(), &wk[size_t(l) * dim * kv_dim], dim, kv_dim);
      matmul(v, xb.data(), &wv[size_t(l) * dim * kv_dim], dim, kv_dim);
      for (int i = 0; i < dim; i += 2) {
        const int head_dim = i % head_size;
        const double freq = 1.0 / std::pow(10000.0, head_dim / double(head_size));
        const double val = pos * freq;
        const double fcr = std::cos(val), fci = std::sin(val);
        const int rotn = i < kv_dim ? 2 : 1;
        for (int r = 0; r < rotn; ++r) {
          double* vec = r == 0 ? q.data() : k;
          const double v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      for (int h = 0; h < n_heads; ++h) {
        const double* qh = &q[size_t(h) * head_size];
        for (int t = 0; t <= pos; ++t) {
          const double* kt =
              &key_cache[(size_t(l) * seq_len + t) * kv_dim + size_t(h / kv_mul) * head_size];
          double score = 0.0;
          for (int i = 0; i < head_size; ++i) score += qh[i] * kt[i];
          att[t] = score / std::sqrt(double(head_size));
        }
        softmax(att.data(), pos + 1);
        double* xbh = &xb[size_t(h) * head_size];
        std::fill(xbh, xbh + head_size, 0.0);
        for (int t = 0; t <= pos; ++t) {
          const double* vt =
              &value_cache[(size_t(l) * seq_len + t) * kv_dim + size_t(h / kv_mul) * head_size];
          for (int i = 0; i < head_size; ++i) xbh[i] += att[t] * vt[i];
        }
      }
      matmul(xb2.data(), xb.data(), &wo[size_t(l) * dim * dim], dim, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb2[i];
      rmsnorm(xb, x, &rms_ffn[size_t(l) * dim]);
      matmul(hb.data(), xb.data(), &w1[size_t(l) * dim * hidden_dim], dim, hidden_dim);
      matmul(hb2.data(), xb.data(), &w3[size_t(l) * dim * hidden_dim], dim, hidden_dim);
      for (int i = 0; i < hidden_dim; ++i) hb[i] = hb[i] * (1.0 / (1.0 + std::exp(-hb[i]))) * hb2[i];
      matmul(xb.data(), hb.data(), &w2[size_t(l) * dim * hidden_dim], hidden_dim, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb[i];
    }
    rmsnorm(x, x, rms_final.data());
    std::vector<double> logits(vocab_size);
    matmul(logits.data(), x.data(), wcls.data(), dim, vocab_size);
    return logits;
  }

  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, head_size;

 private:
  void rmsnorm(std::vector<double>& o, const std::vector<double>& x, const double* w) const {
    double ss = 0.0;
    for (int j = 0; j < dim; ++j) ss += x[j] * x[j];
    ss = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int j = 0; j < dim; ++j) o[j] = w[j] * (ss * x[j]);
  }
  static void softmax(double* x, int size) {
    double max_val = x[0];
    for (int i = 1; i < size; ++i) max_val = std::max(max_val, x[i]);
    double sum = 0.0;
    for (int i = 0; i < size; ++i) sum += (x[i] = std::exp(x[i] - max_val));
    for (int i = 0; i < size; ++i) x[i] /= sum;
  }
  // W (d,n) @ x (n,) -> xout (d,)
  static void matmul(double* xout, const double* x, const double* w, int n, int d) {
    for (int i = 0; i < d; ++i) {
      double val = 0.0;
      for (int j = 0; j < n; ++j) val += w[size_t(i) * n + j] * x[j];
      xout[i] = val;
    }
  }

  std::vector<double> token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
  std::vector<double> key_cache, value_cache;
};

// llama2.c tokenizer file (tok512.bin): max_token_length, then per token: score, len, bytes.
std::vector<std::string> read_llama2c_vocab(const std::string& path, int vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  int32_t max_len;
  in.read(reinterpret_cast<char*>(&max_len), 4);
  std::vector<std::string> vocab(vocab_size);
  for (int i = 0; i < vocab_size; ++i) {
    float score;
    int32_t len;
    in.read(reinterpret_cast<char*>(&score), 4);
    in.read(reinterpret_cast<char*>(&len), 4);
    vocab[i].resize(len);
    in.read(vocab[i].data(), len);
  }
  if (!in) throw std::runtime_error("short read in " + path);
  return vocab;
}

// run.c decode() + safe_printf(): the text run.c prints for `tokens` after BOS.
std::string llama2c_text(const std::vector<std::string>& vocab, int prev, const std::vector<int>& tokens) {
  std::string out;
  for (int token : tokens) {
    if (token == 1) break;  // run.c stops at BOS
    std::string piece = vocab[token];
    if (prev == 1 && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    unsigned int byte;
    if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%02X>", &byte) == 1) piece = std::string(1, char(byte));
    if (piece.size() == 1) {
      const unsigned char c = piece[0];
      if (!(std::isprint(c) || std::isspace(c))) piece.clear();
    }
    out += piece;
    prev = token;
  }
  return out;
}

std::vector<int> llama2c_greedy(Llama2c& m, const std::vector<int>& prompt, int steps,
                                std::vector<std::vector<double>>* all_logits = nullptr) {
  std::vector<int> seq = prompt;
  std::vector<int> generated;
  for (int pos = 0; pos + 1 < int(prompt.size()) + steps; ++pos) {
    const auto logits = m.forward(seq[pos], pos);
    if (all_logits) all_logits->push_back(logits);
    if (pos + 1 < int(seq.size())) continue;
    const int next = ReferenceLlama::argmax(logits);
    generated.push_back(next);
    seq.push_back(next);
  }
  return generated;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// ---- tests on stories260K ---------------------------------------------------------

TEST(ReferenceLlama, ReadsStoriesConfig) {
  const ReferenceLlama ref(kHfDir);
  const ReferenceConfig& c = ref.config();
  EXPECT_EQ(ref.vocab_size(), 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling_type, "");
}

TEST(ReferenceLlama, GreedyAndLogitsMatchLlama2cPortFromBos) {
  const ReferenceLlama ref(kHfDir);
  Llama2c l2c(kLlama2cDir + "/stories260K.bin");
  ASSERT_EQ(l2c.vocab_size, 512);
  ASSERT_EQ(l2c.dim, 64);

  std::vector<std::vector<double>> l2c_logits;
  const std::vector<int> l2c_tokens = llama2c_greedy(l2c, {1}, 100, &l2c_logits);
  const std::vector<int> ref_tokens = ref.greedy({1}, 100);
  EXPECT_EQ(ref_tokens, l2c_tokens);

  std::vector<int> seq = {1};
  seq.insert(seq.end(), l2c_tokens.begin(), l2c_tokens.end() - 1);
  const auto ref_logits = ref.logits(seq);
  ASSERT_EQ(ref_logits.size(), l2c_logits.size());
  double worst = 0.0;
  for (size_t p = 0; p < seq.size(); ++p) worst = std::max(worst, max_abs_diff(ref_logits[p], l2c_logits[p]));
  EXPECT_LT(worst, 1e-6) << "max |logit difference| over " << seq.size() << " positions";
}

TEST(ReferenceLlama, MatchesLlama2cPortWithPrompt) {
  const ReferenceLlama ref(kHfDir);
  Llama2c l2c(kLlama2cDir + "/stories260K.bin");
  const std::vector<int> prompt = {1, 403, 407, 261, 378};  // "Once upon a time"
  std::vector<std::vector<double>> l2c_logits;
  const auto l2c_tokens = llama2c_greedy(l2c, prompt, 40, &l2c_logits);
  EXPECT_EQ(ref.greedy(prompt, 40), l2c_tokens);
  std::vector<int> seq = prompt;
  seq.insert(seq.end(), l2c_tokens.begin(), l2c_tokens.end() - 1);
  const auto ref_logits = ref.logits(seq);
  ASSERT_EQ(ref_logits.size(), l2c_logits.size());
  for (size_t p = 0; p < seq.size(); ++p) EXPECT_LT(max_abs_diff(ref_logits[p], l2c_logits[p]), 1e-6) << "pos " << p;
}

// llama2.c's test_all.py: run.c -t 0.0 -n 200 on stories260K with tok512.bin.
TEST(ReferenceLlama, ReproducesLlama2cExpectedStory) {
  const std::string expected =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
      "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
      "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
      "She said, \"I want to play with your ball, but I can't find it.\"\n"
      "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what to do.\"\n"
      "Lily didn't want to help her mom, so she";
  const ReferenceLlama ref(kHfDir);
  const auto vocab = read_llama2c_vocab(kLlama2cDir + "/tok512.bin", ref.vocab_size());
  // run.c with steps=200 runs positions 0..199, i.e. 200 sampled tokens after BOS.
  const auto tokens = ref.greedy({1}, 200);
  EXPECT_EQ(llama2c_text(vocab, 1, tokens), expected);
}

TEST(ReferenceLlama, GreedyKvCacheEqualsFullRecompute) {
  const ReferenceLlama ref(kHfDir);
  std::vector<int> seq = {1, 403, 407, 261, 378};
  const auto cached = ref.greedy(seq, 24);
  std::vector<int> recomputed;
  for (int n = 0; n < 24; ++n) {
    const int next = ReferenceLlama::argmax(ref.logits(seq).back());
    recomputed.push_back(next);
    seq.push_back(next);
  }
  EXPECT_EQ(cached, recomputed);
  EXPECT_TRUE(ref.greedy(seq, 0).empty());
}

TEST(ReferenceLlama, GreedyIsFastEnough) {
  const ReferenceLlama ref(kHfDir);
  std::vector<int> prompt = {1};
  for (int i = 0; i < 69; ++i) prompt.push_back(3 + (i * 37) % 500);
  const auto start = std::chrono::steady_clock::now();
  const auto out = ref.greedy(prompt, 64);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.size(), 64u);
  EXPECT_LT(seconds, 5.0);  // typically a few tens of milliseconds
}

// ---- helpers and synthetic models ---------------------------------------------------------

TEST(ReferenceLlama, LogSoftmaxAndArgmax) {
  const std::vector<double> logits = {1.0, 3.0, -2.0, 3.0, 1000.0};
  const auto lp = ReferenceLlama::log_softmax(logits);
  double total = 0.0;
  for (double v : lp) total += std::exp(v);
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_NEAR(lp[4], 0.0, 1e-12);
  EXPECT_NEAR(lp[1] - lp[0], 2.0, 1e-12);
  EXPECT_EQ(ReferenceLlama::argmax({1.0, 3.0, -2.0, 3.0}), 1);  // ties go to the lowest id
  EXPECT_EQ(ReferenceLlama::argmax({-1.0}), 0);
}

TEST(ReferenceLlama, HalfPrecisionConversions) {
  EXPECT_EQ(reference_f16_to_double(0x3C00), 1.0);
  EXPECT_EQ(reference_f16_to_double(0xC000), -2.0);
  EXPECT_EQ(reference_f16_to_double(0x7BFF), 65504.0);
  EXPECT_EQ(reference_f16_to_double(0x0001), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(reference_f16_to_double(0x3555), 0.333251953125);
  EXPECT_EQ(reference_f16_to_double(0x8000), 0.0);
  EXPECT_TRUE(std::isinf(reference_f16_to_double(0x7C00)));
  EXPECT_EQ(reference_bf16_to_double(0x3F80), 1.0);
  EXPECT_EQ(reference_bf16_to_double(0xC040), -3.0);
  EXPECT_EQ(reference_bf16_to_double(0x3EAB), 0.333984375);
}

TEST(ReferenceLlama, RopeScaling) {
  ReferenceConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  const auto plain = reference_rope_inv_freq(c);
  ASSERT_EQ(plain.size(), 64u);
  EXPECT_DOUBLE_EQ(plain[0], 1.0);
  EXPECT_DOUBLE_EQ(plain[1], 1.0 / std::pow(500000.0, 2.0 / 128));

  c.rope_scaling_type = "linear";
  c.rope_factor = 4.0;
  const auto linear = reference_rope_inv_freq(c);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_DOUBLE_EQ(linear[i], plain[i] / 4.0);

  // Llama 3.1 settings.
  c.rope_scaling_type = "llama3";
  c.rope_factor = 8.0;
  c.rope_low_freq_factor = 1.0;
  c.rope_high_freq_factor = 4.0;
  c.rope_original_max_position_embeddings = 8192.0;
  const auto l3 = reference_rope_inv_freq(c);
  const double two_pi = 2.0 * std::acos(-1.0);
  int n_high = 0, n_low = 0, n_mid = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = two_pi / plain[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_DOUBLE_EQ(l3[i], plain[i]);
      ++n_high;
    } else if (wavelen > 8192.0 / 1.0) {
      EXPECT_DOUBLE_EQ(l3[i], plain[i] / 8.0);
      ++n_low;
    } else {
      EXPECT_LT(l3[i], plain[i]);
      EXPECT_GT(l3[i], plain[i] / 8.0);
      ++n_mid;
    }
  }
  EXPECT_GT(n_high, 0);
  EXPECT_GT(n_low, 0);
  EXPECT_GT(n_mid, 0);
  // Monotone: scaled frequencies still decrease with the index.
  for (size_t i = 1; i < l3.size(); ++i) EXPECT_LT(l3[i], l3[i - 1]);
}

// A tiny synthetic model, written to a temporary folder in a chosen dtype.
struct TinyModel {
  int hidden = 8, inter = 12, heads = 4, kv_heads = 2, head_dim = 6, layers = 2, vocab = 16;
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<double>>> tensors;
  nlohmann::json config;

  explicit TinyModel(unsigned seed) {
    std::mt19937 rng(seed);
    // Multiples of 1/256 with |numerator| <= 100: exact in F16, BF16 and F32.
    std::uniform_int_distribution<int> dist(-100, 100);
    auto random = [&](std::vector<int64_t> shape) {
      int64_t n = 1;
      for (auto d : shape) n *= d;
      std::vector<double> v(n);
      for (auto& x : v) x = dist(rng) / 256.0;
      return std::make_pair(shape, v);
    };
    auto norm = [&](int64_t n) {
      std::vector<double> v(n);
      for (auto& x : v) x = 1.0 + dist(rng) / 128.0;  // 8 significant bits: exact in BF16
      return std::make_pair(std::vector<int64_t>{n}, v);
    };
    const int64_t q = heads * head_dim, kv = kv_heads * head_dim;
    tensors["model.embed_tokens.weight"] = random({vocab, hidden});
    tensors["model.norm.weight"] = norm(hidden);
    for (int l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      tensors[p + "input_layernorm.weight"] = norm(hidden);
      tensors[p + "post_attention_layernorm.weight"] = norm(hidden);
      tensors[p + "self_attn.q_proj.weight"] = random({q, hidden});
      tensors[p + "self_attn.k_proj.weight"] = random({kv, hidden});
      tensors[p + "self_attn.v_proj.weight"] = random({kv, hidden});
      tensors[p + "self_attn.o_proj.weight"] = random({hidden, q});
      tensors[p + "mlp.gate_proj.weight"] = random({inter, hidden});
      tensors[p + "mlp.up_proj.weight"] = random({inter, hidden});
      tensors[p + "mlp.down_proj.weight"] = random({hidden, inter});
    }
    config = {{"hidden_size", hidden}, {"intermediate_size", inter}, {"num_attention_heads", heads},
              {"num_key_value_heads", kv_heads}, {"head_dim", head_dim}, {"num_hidden_layers", layers},
              {"vocab_size", vocab}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
              {"rope_scaling", nullptr}, {"tie_word_embeddings", true}};
  }

  static void write_safetensors(const std::string& path, const std::string& dtype,
                                const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<double>>>& ts) {
    nlohmann::json header;
    header["__metadata__"] = {{"format", "pt"}};
    std::string data;
    for (const auto& [name, t] : ts) {
      const size_t begin = data.size();
      for (double v : t.second) {
        if (dtype == "F32") {
          const float f = float(v);
          data.append(reinterpret_cast<const char*>(&f), 4);
        } else if (dtype == "BF16") {
          const float f = float(v);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          const uint16_t h = uint16_t(bits >> 16);  // exact for our values
          data.append(reinterpret_cast<const char*>(&h), 2);
        } else if (dtype == "F16") {
          // exact for our values: normal numbers only
          const float f = float(v);
          uint16_t h = 0;
          if (f != 0.0f) {
            int e;
            const double m = std::frexp(std::abs(v), &e);  // v = m * 2^e, m in [0.5, 1)
            const int exp16 = e - 1 + 15;
            const int mant = int(std::lround((m * 2.0 - 1.0) * 1024.0));
            h = uint16_t((v < 0 ? 0x8000 : 0) | (exp16 << 10) | mant);
          }
          data.append(reinterpret_cast<const char*>(&h), 2);
        } else {
          throw std::runtime_error("dtype");
        }
      }
      header[name] = {{"dtype", dtype}, {"shape", t.first}, {"data_offsets", {begin, data.size()}}};
    }
    std::string h = header.dump();
    while (h.size() % 8) h += ' ';
    const uint64_t n = h.size();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(h.data(), std::streamsize(h.size()));
    out.write(data.data(), std::streamsize(data.size()));
  }

  // Writes the folder; with shards=true, splits the tensors over two files plus an index.
  std::string write(const std::string& name, const std::string& dtype, bool shards = false) const {
    const fs::path dir = fs::temp_directory_path() / ("tpbatch_reference_test_" + std::to_string(::getpid())) / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump(2);
    if (!shards) {
      write_safetensors((dir / "model.safetensors").string(), dtype, tensors);
    } else {
      std::map<std::string, std::pair<std::vector<int64_t>, std::vector<double>>> a, b;
      nlohmann::json index;
      int i = 0;
      for (const auto& [n, t] : tensors) {
        const bool first = (i++ % 2) == 0;
        (first ? a : b)[n] = t;
        index["weight_map"][n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
      }
      write_safetensors((dir / "model-00001-of-00002.safetensors").string(), dtype, a);
      write_safetensors((dir / "model-00002-of-00002.safetensors").string(), dtype, b);
      std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
    }
    return dir.string();
  }
};

class ReferenceSynthetic : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("tpbatch_reference_test_" + std::to_string(::getpid())), ec);
  }
  const std::vector<int> tokens_ = {1, 5, 9, 2, 15, 0, 7, 7, 3};
};

TEST_F(ReferenceSynthetic, DtypesAndShardsGiveIdenticalLogits) {
  const TinyModel m(42);
  const auto f32 = ReferenceLlama(m.write("f32", "F32")).logits(tokens_);
  const auto f16 = ReferenceLlama(m.write("f16", "F16")).logits(tokens_);
  const auto bf16 = ReferenceLlama(m.write("bf16", "BF16")).logits(tokens_);
  const auto sharded = ReferenceLlama(m.write("sharded", "F32", true)).logits(tokens_);
  ASSERT_EQ(f32.size(), tokens_.size());
  EXPECT_EQ(f16, f32);
  EXPECT_EQ(bf16, f32);
  EXPECT_EQ(sharded, f32);
}

TEST_F(ReferenceSynthetic, UntiedLmHeadIsUsed) {
  TinyModel m(7);
  const auto tied = ReferenceLlama(m.write("tied", "F32")).logits(tokens_);
  auto head = m.tensors["model.embed_tokens.weight"];
  for (auto& v : head.second) v *= 2.0;
  m.tensors["lm_head.weight"] = head;
  // Tied: lm_head.weight is ignored, as in Hugging Face.
  EXPECT_EQ(ReferenceLlama(m.write("tied_with_head", "F32")).logits(tokens_), tied);
  m.config["tie_word_embeddings"] = false;
  const auto untied = ReferenceLlama(m.write("untied", "F32")).logits(tokens_);
  for (size_t p = 0; p < tied.size(); ++p)
    for (size_t i = 0; i < tied[p].size(); ++i) EXPECT_NEAR(untied[p][i], 2.0 * tied[p][i], 1e-12);
}

// Attention weights sum to one, so a v_proj bias b is the same as an o_proj bias
// Wo * b' (b' = b repeated for the query heads that share each KV head).
TEST_F(ReferenceSynthetic, BiasesAreApplied) {
  TinyModel m(3);
  const auto plain = ReferenceLlama(m.write("plain", "F32")).logits(tokens_);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(-100, 100);
  const int kv = m.kv_heads * m.head_dim, q = m.heads * m.head_dim, group = m.heads / m.kv_heads;
  TinyModel with_v = m, with_o = m;
  for (int l = 0; l < m.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    std::vector<double> b(kv);
    for (auto& x : b) x = dist(rng) / 64.0;
    with_v.tensors[p + "v_proj.bias"] = {{kv}, b};
    const auto& wo = m.tensors[p + "o_proj.weight"].second;
    std::vector<double> bo(m.hidden, 0.0);
    for (int r = 0; r < m.hidden; ++r)
      for (int c = 0; c < q; ++c) bo[r] += wo[size_t(r) * q + c] * b[(c / m.head_dim / group) * m.head_dim + c % m.head_dim];
    with_o.tensors[p + "o_proj.bias"] = {{m.hidden}, bo};
  }
  const auto lv = ReferenceLlama(with_v.write("vbias", "F32")).logits(tokens_);
  const auto lo = ReferenceLlama(with_o.write("obias", "F32")).logits(tokens_);
  double diff_bias = 0.0, diff_plain = 0.0;
  for (size_t p = 0; p < lv.size(); ++p) {
    diff_bias = std::max(diff_bias, max_abs_diff(lv[p], lo[p]));
    diff_plain = std::max(diff_plain, max_abs_diff(lv[p], plain[p]));
  }
  // o_proj.bias went through float32 on disk; allow for that rounding.
  EXPECT_LT(diff_bias, 1e-5);
  EXPECT_GT(diff_plain, 1e-2);

  // q/k biases (Qwen2) change the result too.
  TinyModel with_qk = m;
  for (int l = 0; l < m.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    with_qk.tensors[p + "q_proj.bias"] = {{q}, std::vector<double>(q, 0.5)};
    with_qk.tensors[p + "k_proj.bias"] = {{kv}, std::vector<double>(kv, -0.25)};
  }
  const auto lqk = ReferenceLlama(with_qk.write("qkbias", "F32")).logits(tokens_);
  EXPECT_GT(max_abs_diff(lqk.back(), plain.back()), 1e-6);
  // Position 0 attends only to itself, so q/k biases cannot change its logits.
  EXPECT_LT(max_abs_diff(lqk.front(), plain.front()), 1e-12);
}

TEST_F(ReferenceSynthetic, ConfigDefaults) {
  const TinyModel m(5);  // hidden 8, heads 4, kv heads 2
  nlohmann::json cfg = m.config;
  cfg.erase("head_dim");
  const fs::path dir = fs::temp_directory_path() / ("tpbatch_reference_test_" + std::to_string(::getpid())) / "cfg";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_EQ(reference_read_config(dir.string()).head_dim, 2);
  cfg["head_dim"] = nullptr;
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_EQ(reference_read_config(dir.string()).head_dim, 2);
  cfg["head_dim"] = 16;
  cfg.erase("num_key_value_heads");
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_EQ(reference_read_config(dir.string()).head_dim, 16);
  EXPECT_EQ(reference_read_config(dir.string()).num_key_value_heads, 4);
  EXPECT_FALSE(reference_read_config(dir.string()).tie_word_embeddings == false);  // config says true

  cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  std::ofstream(dir / "config.json") << cfg.dump();
  ReferenceConfig c = reference_read_config(dir.string());
  EXPECT_EQ(c.rope_scaling_type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_original_max_position_embeddings, 8192.0);
  cfg["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  std::ofstream(dir / "config.json") << cfg.dump();
  c = reference_read_config(dir.string());
  EXPECT_EQ(c.rope_scaling_type, "linear");
  EXPECT_DOUBLE_EQ(c.rope_factor, 2.0);
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_THROW(reference_read_config(dir.string()), std::runtime_error);
}

}  // namespace
