#include "model/kv_cache.h"

namespace qmpi {

KvCache::KvCache(Backend& backend, const KvCacheShape& shape) : shape_(shape) {
  const size_t per_pool = size_t(shape.num_blocks) * size_t(shape.block_size) *
                          size_t(shape.kv_heads) * size_t(shape.head_dim) * sizeof(float);
  for (int l = 0; l < shape.num_layers; ++l) {
    k_.push_back(backend.alloc(per_pool));
    v_.push_back(backend.alloc(per_pool));
  }
}

KvLayerView KvCache::layer(int l) const {
  return {k_[l].as<float>(), v_[l].as<float>(), shape_.num_blocks,
          shape_.block_size, shape_.kv_heads,   shape_.head_dim};
}

}  // namespace qmpi
