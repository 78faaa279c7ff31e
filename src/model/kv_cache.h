// This rank's paged KV cache: one K and one V pool per local layer, split into fixed-size
// blocks. Which block belongs to which sequence is decided on rank 0 (block_manager.h) and
// arrives with each step; this class only owns the memory.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

struct KvCacheShape {
  int num_layers = 0;  // layers on this stage
  int64_t num_blocks = 0;
  int block_size = 16;
  int kv_heads = 0;  // KV heads on this TP rank
  int head_dim = 0;

  uint64_t bytes_per_block() const {
    return 2ull * uint64_t(num_layers) * uint64_t(block_size) * uint64_t(kv_heads) *
           uint64_t(head_dim) * sizeof(float);
  }
  uint64_t bytes() const { return bytes_per_block() * uint64_t(num_blocks); }
};

class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheShape& shape);
  KvLayerView layer(int local_layer) const;
  const KvCacheShape& shape() const { return shape_; }

 private:
  KvCacheShape shape_;
  std::vector<Buffer> k_, v_;
};

}  // namespace qmpi
