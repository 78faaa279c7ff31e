// This rank's paged KV cache: one K and one V pool per local layer, split into fixed-size
// blocks. Which block belongs to which sequence is decided on rank 0 (block_manager.h) and
// arrives with each step; this class only owns the memory.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "kernels/kv_dtype.h"

namespace qmpi {

struct KvCacheShape {
  int num_layers = 0;  // layers on this stage
  int64_t num_blocks = 0;
  int block_size = 16;
  int kv_heads = 0;  // KV heads on this TP rank
  int head_dim = 0;
  DType dtype = DType::BF16;  // F32, BF16 or F8_E4M3 (kernels/kv_dtype.h)

  // One pool's bytes per block of one layer (fp8's scales included).
  uint64_t pool_bytes_per_block() const {
    return uint64_t(block_size) * uint64_t(kv_heads) * kv_vector_bytes(dtype, head_dim);
  }
  uint64_t bytes_per_block() const { return 2ull * uint64_t(num_layers) * pool_bytes_per_block(); }
  uint64_t bytes() const { return bytes_per_block() * uint64_t(num_blocks); }
};

class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheShape& shape);
  KvLayerView layer(int local_layer) const;
  const KvCacheShape& shape() const { return shape_; }

 private:
  KvCacheShape shape_;
  // Per layer: the elements and, for fp8, each vector's scale after them in the same buffer.
  std::vector<Buffer> k_, v_;
};

}  // namespace qmpi
