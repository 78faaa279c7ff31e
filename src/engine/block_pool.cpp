#include "engine/block_pool.h"

#include <algorithm>

#include "core/errors.h"
#include "core/splitmix64.h"

namespace qmpi {

BlockPool::BlockPool(BlockManager& blocks, bool prefix_caching)
    : blocks_(blocks),
      prefix_caching_(prefix_caching),
      refs_(size_t(blocks.num_blocks()), 0),
      key_(size_t(blocks.num_blocks()), 0),
      content_(size_t(blocks.num_blocks())),
      lru_tick_(size_t(blocks.num_blocks()), 0) {}

BlockPool::~BlockPool() {
  while (!lru_.empty()) evict_one();
}

uint64_t BlockPool::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = splitmix64(parent ^ 0x51ed270b27a4c1d3ull);
  for (int32_t t : tokens) h = splitmix64(h ^ uint64_t(uint32_t(t)));
  return h == 0 ? 1 : h;  // 0 means "no parent"
}

uint64_t BlockPool::chain_root(int32_t adapter) {
  return adapter < 0 ? 0 : splitmix64(0x10ca0000ull + uint64_t(adapter)) | 1;
}

int64_t BlockPool::match_prefix(std::span<const int32_t> tokens, int64_t max_blocks,
                                std::vector<int32_t>& table, std::vector<uint64_t>& hashes,
                                uint64_t root) {
  if (!prefix_caching_) return 0;
  if (!table.empty()) raise(Err::Internal, "prefix match into a non-empty block table");
  const size_t bs = size_t(block_size());
  uint64_t parent = root;
  int64_t matched = 0;
  while (matched < max_blocks && (size_t(matched) + 1) * bs <= tokens.size()) {
    const auto chunk = tokens.subspan(size_t(matched) * bs, bs);
    const uint64_t h = chain_hash(parent, chunk);
    const auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const int32_t b = it->second;
    if (!std::equal(chunk.begin(), chunk.end(), content_[size_t(b)].begin())) break;
    if (refs_[size_t(b)]++ == 0) lru_.erase(lru_tick_[size_t(b)]);
    table.push_back(b);
    hashes.push_back(h);
    parent = h;
    ++matched;
  }
  return matched;
}

void BlockPool::evict_one() {
  const auto oldest = lru_.begin();
  const int32_t b = oldest->second;
  lru_.erase(oldest);
  by_hash_.erase(key_[size_t(b)]);
  key_[size_t(b)] = 0;
  content_[size_t(b)].clear();
  std::vector<int32_t> one{b};
  blocks_.release(one);
}

bool BlockPool::ensure(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = blocks_for(tokens) - int64_t(table.size());
  if (need <= 0) return true;
  if (need > available()) return false;
  while (blocks_.free_blocks() < need) evict_one();
  const size_t before = table.size();
  if (!blocks_.ensure(table, tokens)) raise(Err::Internal, "block manager refused free blocks");
  for (size_t i = before; i < table.size(); ++i) refs_[size_t(table[i])] = 1;
  return true;
}

void BlockPool::publish(int32_t block, uint64_t hash, std::span<const int32_t> tokens) {
  if (!prefix_caching_ || key_[size_t(block)] != 0) return;
  // An identical block published by another sequence first keeps the key; this one stays
  // private and returns to the free list when its sequence ends.
  if (!by_hash_.emplace(hash, block).second) return;
  key_[size_t(block)] = hash;
  content_[size_t(block)].assign(tokens.begin(), tokens.end());
}

void BlockPool::release(std::vector<int32_t>& table) {
  // Last block first: a prefix's first blocks get the newest ticks and are evicted last.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    if (refs_[size_t(b)] <= 0) raise(Err::Internal, "KV block released more often than taken");
    if (--refs_[size_t(b)] > 0) continue;
    if (key_[size_t(b)] != 0) {
      lru_tick_[size_t(b)] = ++tick_;
      lru_.emplace(tick_, b);
    } else {
      std::vector<int32_t> one{b};
      blocks_.release(one);
    }
  }
  table.clear();
}

void BlockPool::shrink(std::vector<int32_t>& table, size_t keep) {
  if (table.size() <= keep) return;
  std::vector<int32_t> tail(table.begin() + long(keep), table.end());
  table.resize(keep);
  release(tail);
}

}  // namespace qmpi
