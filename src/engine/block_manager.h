// KV blocks on rank 0: which cache blocks each sequence owns. Every rank holds the same number
// of blocks, so a block id chosen here is valid on all of them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qmpi {

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int block_size);

  // Grows `table` to cover `tokens` positions. Returns false, allocating nothing, when too few
  // blocks are free.
  bool ensure(std::vector<int32_t>& table, int64_t tokens);
  // Returns the table's blocks to the free list and empties it.
  void release(std::vector<int32_t>& table);

  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }

 private:
  int64_t num_blocks_;
  int block_size_;
  std::vector<int32_t> free_;  // a stack: recently freed blocks are reused first (warm in cache)
};

}  // namespace qmpi
