#include "model/kv_cache.h"

namespace qmpi {
namespace {

// fp8 pools keep each vector's scale after the elements, from this byte on (64-byte aligned).
size_t scales_at(const KvCacheShape& s) {
  const size_t elements = size_t(s.num_blocks) * size_t(s.block_size) * size_t(s.kv_heads) *
                          size_t(s.head_dim) * dtype_size(s.dtype);
  return (elements + 63) / 64 * 64;
}

}  // namespace

KvCache::KvCache(Backend& backend, const KvCacheShape& shape) : shape_(shape) {
  size_t per_pool = size_t(shape.num_blocks) * size_t(shape.pool_bytes_per_block());
  if (shape.dtype == DType::F8_E4M3)
    per_pool = scales_at(shape) + size_t(shape.num_blocks) * size_t(shape.block_size) *
                                      size_t(shape.kv_heads) * sizeof(float);
  // Zeroed: a slot no token was stored in reads as zeros, never as stale memory (and qmpi
  // bench's --context fill relies on it). On the CPU the pools are mapped lazily: a block's
  // pages cost memory once a sequence writes it, and freed blocks are reused first
  // (BlockManager's free list is a stack), so the memory held follows the sequences.
  for (int l = 0; l < shape.num_layers; ++l) {
    k_.push_back(backend.alloc_zeroed(per_pool));
    v_.push_back(backend.alloc_zeroed(per_pool));
  }
}

KvLayerView KvCache::layer(int l) const {
  KvLayerView view{k_[l].data(),    v_[l].data(),    shape_.num_blocks, shape_.block_size,
                   shape_.kv_heads, shape_.head_dim, shape_.dtype};
  if (shape_.dtype == DType::F8_E4M3) {
    view.k_scale = reinterpret_cast<float*>(static_cast<char*>(view.k) + scales_at(shape_));
    view.v_scale = reinterpret_cast<float*>(static_cast<char*>(view.v) + scales_at(shape_));
  }
  return view;
}

}  // namespace qmpi
