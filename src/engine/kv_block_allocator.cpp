#include "engine/kv_block_allocator.h"

#include <algorithm>
#include <iterator>

#include "common/error.h"

namespace tpbatch {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: every input bit moves every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

KvBlockAllocator::KvBlockAllocator(int64_t num_blocks, int64_t block_size, bool prefix_caching, BlockHash hash)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      caching_(prefix_caching),
      hash_(hash),
      meta_(static_cast<size_t>(num_blocks)) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));  // hand out 0 first
  if (caching_) tokens_.resize(static_cast<size_t>(num_blocks * block_size));
}

uint64_t KvBlockAllocator::chain_hash(uint64_t parent_hash, std::span<const int32_t> block_tokens) {
  uint64_t h = mix(parent_hash ^ 0x51afd7ed558ccd1bull);
  for (int32_t t : block_tokens) h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull));
  return mix(h ^ block_tokens.size());
}

void KvBlockAllocator::forget(int32_t b) {
  Block& m = meta_[static_cast<size_t>(b)];
  if (m.cached) {
    auto [lo, hi] = by_hash_.equal_range(m.hash);
    for (auto it = lo; it != hi; ++it)
      if (it->second == b) {
        by_hash_.erase(it);
        break;
      }
  }
  m.cached = m.identified = false;
  m.canon_id = m.parent_id = -1;
  ++m.incarnation;  // blocks that chained to this one no longer match anything
}

int32_t KvBlockAllocator::take_block() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_.front();
    lru_.pop_front();
    forget(b);
  }
  meta_[static_cast<size_t>(b)].refs = 1;
  return b;
}

bool KvBlockAllocator::grow(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = blocks_for(tokens) - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) table.push_back(take_block());
  return true;
}

void KvBlockAllocator::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    Block& m = meta_[static_cast<size_t>(b)];
    if (m.refs <= 0) throw Error("internal error: KV block " + std::to_string(b) + " released more often than taken");
    if (--m.refs > 0) continue;
    if (m.cached) {
      lru_.push_back(b);
      m.lru_at = std::prev(lru_.end());
    } else {
      forget(b);
      free_.push_back(b);
    }
  }
  table.clear();
}

bool KvBlockAllocator::holds(int32_t b, std::span<const int32_t> block_tokens, int32_t parent_id,
                             uint32_t parent_inc) const {
  const Block& m = meta_[static_cast<size_t>(b)];
  if (!m.cached || m.parent_id != parent_id || (parent_id >= 0 && m.parent_incarnation != parent_inc)) return false;
  const std::span<const int32_t> mine = tokens_of(b);
  return std::equal(mine.begin(), mine.end(), block_tokens.begin(), block_tokens.end());
}

int64_t KvBlockAllocator::share_cached_prefix(std::vector<int32_t>& table, std::span<const int32_t> tokens,
                                              int64_t max_tokens) {
  if (!table.empty()) throw Error("internal error: prefix lookup into a non-empty block table");
  if (!caching_) return 0;
  const size_t bs = static_cast<size_t>(block_size_);
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(std::max<int64_t>(0, max_tokens)));
  uint64_t parent_hash = kNoParent;
  int32_t parent_id = -1;
  uint32_t parent_inc = 0;
  for (size_t begin = 0; begin + bs <= limit; begin += bs) {
    const std::span<const int32_t> blk = tokens.subspan(begin, bs);
    const uint64_t h = hash_(parent_hash, blk);
    int32_t hit = -1;
    auto [lo, hi] = by_hash_.equal_range(h);
    for (auto it = lo; it != hi && hit < 0; ++it)
      if (holds(it->second, blk, parent_id, parent_inc)) hit = it->second;
    if (hit < 0) break;
    Block& m = meta_[static_cast<size_t>(hit)];
    if (m.refs++ == 0) lru_.erase(m.lru_at);
    table.push_back(hit);
    parent_hash = h;
    parent_id = hit;
    parent_inc = m.incarnation;
  }
  return static_cast<int64_t>(table.size()) * block_size_;
}

void KvBlockAllocator::register_full_blocks(const std::vector<int32_t>& table, std::span<const int32_t> tokens,
                                            int64_t computed) {
  if (!caching_) return;
  const size_t bs = static_cast<size_t>(block_size_);
  const size_t full = std::min(table.size(), std::min(tokens.size(), static_cast<size_t>(std::max<int64_t>(0, computed))) / bs);
  size_t j = 0;  // identified blocks form a prefix of the table
  while (j < full && meta_[static_cast<size_t>(table[j])].identified) ++j;
  if (j == full) return;
  uint64_t parent_hash = kNoParent;
  int32_t parent_id = -1;
  uint32_t parent_inc = 0;
  if (j > 0) {
    const Block& p = meta_[static_cast<size_t>(table[j - 1])];
    parent_hash = p.hash;
    parent_id = p.canon_id;
    parent_inc = p.canon_incarnation;
  }
  for (; j < full; ++j) {
    const int32_t b = table[j];
    const std::span<const int32_t> blk = tokens.subspan(j * bs, bs);
    const uint64_t h = hash_(parent_hash, blk);
    int32_t canon = -1;
    auto [lo, hi] = by_hash_.equal_range(h);
    for (auto it = lo; it != hi && canon < 0; ++it)
      if (holds(it->second, blk, parent_id, parent_inc)) canon = it->second;
    Block& m = meta_[static_cast<size_t>(b)];
    m.identified = true;
    m.hash = h;
    m.parent_id = parent_id;
    m.parent_incarnation = parent_inc;
    if (canon < 0) {  // the first block with this content: it becomes the cached one
      canon = b;
      m.cached = true;
      std::copy(blk.begin(), blk.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * bs));
      by_hash_.emplace(h, b);
    }
    m.canon_id = canon;
    m.canon_incarnation = meta_[static_cast<size_t>(canon)].incarnation;
    parent_hash = h;
    parent_id = canon;
    parent_inc = m.canon_incarnation;
  }
}

}  // namespace tpbatch
