#pragma once
// The paged KV cache's bookkeeping: fixed-size blocks handed out to sequences' block tables. The
// leader owns it; block ids travel to the replica's peers inside each step, so every rank (every
// TP rank and every pipeline stage, each for its own layers) writes and reads the same blocks.
//
// Automatic prefix caching (vLLM-style): a block full of tokens is identified by a hash chained
// over (its parent block's hash, its token ids). A registered block stays cached after the last
// sequence using it lets go; a later sequence whose leading tokens are the same shares it
// (reference count + 1) instead of computing it again. Unreferenced cached blocks are evicted,
// least recently released first, only when the allocator runs out of never-used blocks.
// A hit is verified, never trusted to the hash: the block's stored tokens must equal the tokens
// looked up, and its parent must be the very block (id and incarnation) the lookup matched one
// block earlier, so by induction the whole prefix is equal.
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace tpbatch {

class KvBlockAllocator {
 public:
  // Chained hash of one full block's tokens after its parent block's hash (kNoParent for block 0).
  using BlockHash = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> block_tokens);
  static uint64_t chain_hash(uint64_t parent_hash, std::span<const int32_t> block_tokens);
  static constexpr uint64_t kNoParent = 0x9e3779b97f4a7c15ull;

  // prefix_caching false: blocks go back to the free list when released and nothing is shared.
  // hash: tests pass a colliding one to show that hits are verified.
  KvBlockAllocator(int64_t num_blocks, int64_t block_size, bool prefix_caching = false, BlockHash hash = &chain_hash);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  bool prefix_caching() const { return caching_; }
  // Blocks a table can still get: never used (or uncached) ones plus unreferenced cached ones.
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  int64_t cached_blocks() const { return static_cast<int64_t>(by_hash_.size()); }  // registered, in use or not
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  int32_t ref_count(int32_t block) const { return meta_[static_cast<size_t>(block)].refs; }

  // Grows `table` to cover `tokens` tokens with fresh blocks (never-used ones first, then the
  // least recently released cached ones, whose cache entries go); false (and nothing taken) when
  // too few blocks are free.
  bool grow(std::vector<int32_t>& table, int64_t tokens);
  // Lets go of every block of `table` (reference count - 1). A cached block left unreferenced
  // stays cached; the table's last blocks are evicted first, so a prefix outlives its tails.
  void release(std::vector<int32_t>& table);

  // Appends to the empty `table` the cached blocks that hold tokens[0, k * block_size) for the
  // largest k (k * block_size <= max_tokens), sharing them; returns k * block_size.
  int64_t share_cached_prefix(std::vector<int32_t>& table, std::span<const int32_t> tokens, int64_t max_tokens);
  // Registers the blocks of `table` that are full of tokens[0, computed) (their K/V written or
  // being written by a step that runs before any later step) so later lookups find them. Blocks
  // registered before are skipped; a block whose content is already cached elsewhere stays
  // private (its children still chain to the cached one).
  void register_full_blocks(const std::vector<int32_t>& table, std::span<const int32_t> tokens, int64_t computed);

 private:
  struct Block {
    int32_t refs = 0;
    uint32_t incarnation = 0;         // + 1 each time the block gets a new identity
    bool identified = false;          // full and hashed within the table that holds it
    bool cached = false;              // the canonical holder of its content (in by_hash_)
    uint64_t hash = 0;
    int32_t canon_id = -1;            // the cached block with this content (itself when cached)
    uint32_t canon_incarnation = 0;
    int32_t parent_id = -1;           // the cached parent this content chains to (-1: first block)
    uint32_t parent_incarnation = 0;
    std::list<int32_t>::iterator lru_at;  // valid when cached && refs == 0
  };
  int32_t take_block();               // a free block, evicting the LRU cached one if need be
  void forget(int32_t block);         // drops a block's identity (and its cache entry)
  bool holds(int32_t block, std::span<const int32_t> block_tokens, int32_t parent_id, uint32_t parent_inc) const;
  std::span<const int32_t> tokens_of(int32_t block) const {
    return {tokens_.data() + static_cast<size_t>(block) * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_)};
  }

  int64_t num_blocks_, block_size_;
  bool caching_;
  BlockHash hash_;
  std::vector<int32_t> free_;                     // no identity worth keeping; handed out from the back
  std::list<int32_t> lru_;                        // cached and unreferenced, least recently released first
  std::vector<Block> meta_;
  std::vector<int32_t> tokens_;                   // each cached block's tokens, block_size per block
  std::unordered_multimap<uint64_t, int32_t> by_hash_;
};

}  // namespace tpbatch
