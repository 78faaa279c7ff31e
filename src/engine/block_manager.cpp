#include "engine/block_manager.h"

namespace qmpi {

BlockManager::BlockManager(int64_t num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  free_.reserve(size_t(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

bool BlockManager::ensure(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = blocks_for(tokens) - int64_t(table.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void BlockManager::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace qmpi
