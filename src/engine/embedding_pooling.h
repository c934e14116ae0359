#pragma once
// The embed task's pooling: which of a prompt's final hidden states (after the
// model's final norm, as Hugging Face's AutoModel `last_hidden_state`) make up its embedding, and
// how they are combined. A prompt may be prefilled in several chunks (and recomputed after a
// preemption), so pooling is a running sum over the chunks' chosen rows, finished once the last
// prompt token has been computed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "job/job_spec.h"  // Pooling, the job key embed.pooling

namespace tpbatch {

// Of a chunk computing prompt positions [chunk_begin, chunk_begin + chunk_rows) of a prompt of
// prompt_len tokens, the rows (offsets within the chunk) whose hidden states the pooling reads:
// cls the first position, last the last one, mean all of them. nullopt when none.
struct PooledRows {
  int64_t first = 0;
  int64_t count = 0;
};
std::optional<PooledRows> pooled_rows(Pooling p, int64_t chunk_begin, int64_t chunk_rows, int64_t prompt_len);

// The running state of one prompt's embedding.
class EmbeddingAccumulator {
 public:
  // Starts over (a prompt recomputed from its first token after a preemption).
  void reset() { sum_.clear(), count_ = 0; }
  // Adds the sum of `rows` hidden states (`row_sum`, `hidden` values).
  void add(const float* row_sum, int64_t hidden, int64_t rows);
  int64_t rows() const { return count_; }
  // The embedding: the sum (cls, last: one row) or the mean, L2-normalised when asked (a zero
  // vector stays zero).
  std::vector<float> finish(Pooling p, bool normalize) const;

 private:
  std::vector<double> sum_;
  int64_t count_ = 0;
};

}  // namespace tpbatch
