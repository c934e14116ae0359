#pragma once
// The paged KV cache's bookkeeping: a free list of fixed-size blocks. The leader owns it; block
// ids travel to the replica's peers inside each step, so every rank writes the same blocks.
#include <cstdint>
#include <vector>

namespace tpbatch {

class KvBlockAllocator {
 public:
  KvBlockAllocator(int64_t num_blocks, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Grows `table` to cover `tokens` tokens; false (and nothing taken) when too few blocks are free.
  bool grow(std::vector<int32_t>& table, int64_t tokens);
  void release(std::vector<int32_t>& table);

 private:
  int64_t num_blocks_, block_size_;
  std::vector<int32_t> free_;
};

}  // namespace tpbatch
