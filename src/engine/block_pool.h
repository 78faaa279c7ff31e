// KV blocks shared between sequences (prefix caching) on top of the BlockManager's free list.
// A full block of computed tokens is published under a key that chains the keys of the blocks
// before it, so a later sequence whose prompt starts with the same tokens reuses the block
// instead of recomputing it. Blocks are reference counted; a published block nobody uses stays
// cached until the free list runs short, then the least recently used one is evicted.
// Only full blocks are ever shared and a sequence never writes into a block it did not
// allocate, so no copy-on-write is needed.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"

namespace qmpi {

class BlockPool {
 public:
  BlockPool(BlockManager& blocks, bool prefix_caching);
  // Gives the cached blocks nobody uses back to the BlockManager, so that a later pool (another
  // scheduler over the same cache, as qmpi bench makes) finds them free.
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // The key of a full block of `tokens` following a block with key `parent` (0 for the first).
  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);
  // The `parent` of a sequence's first block: 0 for the base model, else a key of its LoRA
  // adapter, since the same tokens under another adapter hold other K/V.
  static uint64_t chain_root(int32_t adapter);

  // Appends to `table` (and its key to `hashes`) the cached blocks that hold the start of
  // `tokens`, at most `max_blocks` of them. `table` must be empty. Returns how many matched.
  int64_t match_prefix(std::span<const int32_t> tokens, int64_t max_blocks,
                       std::vector<int32_t>& table, std::vector<uint64_t>& hashes,
                       uint64_t root = 0);
  // Grows `table` with private blocks to cover `tokens` positions, evicting unused cached
  // blocks when the free list is short. Returns false, changing nothing, when too few are left.
  bool ensure(std::vector<int32_t>& table, int64_t tokens);
  // Publishes table[index], now full with `tokens` (block_size of them) under `hash`.
  void publish(int32_t block, uint64_t hash, std::span<const int32_t> tokens);
  // Drops the table's references (cached blocks stay for later hits) and empties it.
  void release(std::vector<int32_t>& table);
  // Releases the table's blocks past the first `keep` (guessed tokens that were rejected).
  void shrink(std::vector<int32_t>& table, size_t keep);

  bool prefix_caching() const { return prefix_caching_; }
  int block_size() const { return blocks_.block_size(); }
  int64_t num_blocks() const { return blocks_.num_blocks(); }
  int64_t blocks_for(int64_t tokens) const { return blocks_.blocks_for(tokens); }
  // Blocks a sequence could get now: free ones plus cached ones nobody uses.
  int64_t available() const { return blocks_.free_blocks() + int64_t(lru_.size()); }
  int64_t in_use() const { return num_blocks() - available(); }
  int64_t free_blocks() const { return blocks_.free_blocks(); }  // no cached block among them
  int64_t cached() const { return int64_t(by_hash_.size()); }

 private:
  void evict_one();

  BlockManager& blocks_;
  bool prefix_caching_;
  std::vector<int32_t> refs_;                  // per block: tables holding it
  std::vector<uint64_t> key_;                  // per block: its hash when published
  std::vector<std::vector<int32_t>> content_;  // per block: its tokens when published
  std::vector<uint64_t> lru_tick_;             // per block: when its last user let go
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::map<uint64_t, int32_t> lru_;  // tick -> cached block with no users, oldest first
  uint64_t tick_ = 0;
};

}  // namespace qmpi
